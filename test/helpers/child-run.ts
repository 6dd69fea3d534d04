/**
 * A node script run as a child process to its end, for the tests whose subject may abort a process (a thread
 * ended with a zeromq.js socket open: test/lifecycle/): the abort is the child's exit, observed here.
 */
import { spawn } from "node:child_process";

export interface ChildEnd {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  err: string;
}

/** Runs `script` (a compiled .js file) with `args` under this node, and resolves with how it ended and what it wrote. */
export function runChild(script: URL, args: string[]): Promise<ChildEnd> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [script.pathname, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err += d));
    p.on("close", (code, signal) => resolve({ code, signal, out, err }));
  });
}
