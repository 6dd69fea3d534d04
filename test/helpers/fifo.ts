/**
 * A FIFO nobody writes, for tests of a thread blocked outside JavaScript (its read never returns until released):
 * in a directory of its own under the system's temporary directory (outside a master's root, which its stop may
 * remove), and how to let its reader go.
 */
import { execFileSync } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

export function neverWritten(): { fifo: string; inside: string; release: () => void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-fifo-"));
  const fifo = path.join(dir, "never-written");
  execFileSync("mkfifo", [fifo]);
  let released = false;
  return {
    fifo,
    inside: path.join(dir, "runner-inside"),
    release: () => {
      if (released) return;
      released = true;
      // a writer opens and closes it: a reader blocked in its open returns, then reads the end (with no reader,
      // as when the master's process is gone, the non-blocking open fails with ENXIO and there is nothing to do)
      try {
        closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ENXIO") throw e;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
