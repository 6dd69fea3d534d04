/**
 * The real-salt harness (../shared/real-salt): real Python salt-minions (3007.x and v3006.8) started
 * from Salt's source against a brine master. Tests using it skip with a message when Salt's source
 * is not configured (SALT_GIT_DIR) or the harness check fails.
 */
import { spawnSync, spawn } from "node:child_process";
import path from "node:path";
import { sharedDir } from "./paths.js";
import { onThisProcessEnd } from "../../tools/local-cluster.js";

export const HARNESS = path.join(sharedDir, "real-salt");

export function realSaltSkipReason(refs = ["3007.x", "v3006.8"]): string | undefined {
  if (!process.env.SALT_GIT_DIR) return "SALT_GIT_DIR is not set: real salt-minion tests skipped (see ../shared/real-salt/README.md)";
  const r = spawnSync(path.join(HARNESS, "check.sh"), refs, { encoding: "utf8" });
  // a harness that could not even be started (no ../shared/real-salt beside the clone) has no output: say why
  if (r.status !== 0) return `real-salt harness not usable here: ${(r.error ? r.error.message : `${r.stdout ?? ""}${r.stderr ?? ""}`).trim().slice(0, 200)}`;
  return undefined;
}

/**
 * Start a minion and wait until it is ready. A minion whose configured publish_port is not 4505 uses
 * that port rather than the one in the auth reply (Salt's AsyncPubChannel), so it is passed through. Asynchronous on purpose: the master under test usually
 * runs in this same process and must keep serving the minion's sign-in while we wait.
 */
export function startRealMinion(dir: string, id: string, retPort: number, publishPort: number, ref = "3007.x", extra = "", master = "127.0.0.1"): Promise<string> {
  stopAtThisProcessEnd(dir);
  return new Promise((resolve, reject) => {
    const p = spawn(path.join(HARNESS, "start-minion.sh"), ["--dir", dir, id, master, String(retPort), String(publishPort)], {
      env: { ...process.env, SALT_REF: ref, SALT_WAIT: "90", SALT_MINION_EXTRA: extra },
    });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (out += d));
    p.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`start-minion ${id} failed (${code}): ${out.slice(-500)}`))));
  });
}

/** the harness directories whose daemons this process started and has not stopped → forgets their stop at its end */
const stopAtEnd = new Map<string, () => void>();

/**
 * The harness's daemons (minions, masters, salt-api, syndics) run in sessions of their own (setsid), out of reach of
 * the test runner's kill of a file's process group: call this before starting any in `dir`, and they are stopped
 * when this process ends, unless the test stopped them first (stopRealMinions).
 */
export function stopAtThisProcessEnd(dir: string): void {
  if (!stopAtEnd.has(dir)) stopAtEnd.set(dir, onThisProcessEnd(() => stopRealMinions(dir)));
}

/**
 * Stops every daemon of the harness in `dir` (stop-all.sh). In a session of its own (`setsid -w`, which waits for
 * it): when this runs from this process's end hook, the test runner is ending this file's process group, and a
 * SIGTERM to the group must not end the stop half-way.
 */
export function stopRealMinions(dir: string): void {
  stopAtEnd.get(dir)?.();
  stopAtEnd.delete(dir);
  spawnSync("setsid", ["-w", path.join(HARNESS, "stop-all.sh"), "--dir", dir], { env: { ...process.env, SALT_STOP_WAIT: "0" }, timeout: 60_000 });
}

/** The unpacked source tree of a Salt ref (the harness's setup.sh unpacks it on first use and names it). */
export function realSaltSource(ref = "3007.x"): string {
  const r = spawnSync(path.join(HARNESS, "setup.sh"), [], { env: { ...process.env, SALT_REF: ref }, encoding: "utf8", timeout: 300_000 });
  const m = /source for \S+: (\S+)/.exec(r.stdout ?? "");
  if (r.status !== 0 || !m) throw new Error(`real-salt setup.sh failed: ${(r.stdout + r.stderr).slice(-400)}`);
  return m[1]!;
}

/** PYTHONPATH for running a Salt script from `src` the way the harness runs its daemons (source, then its shims). */
export function realSaltEnv(src: string): NodeJS.ProcessEnv {
  return { ...process.env, PYTHONDONTWRITEBYTECODE: "1", PYTHONPATH: `${src}:${path.join(HARNESS, "shim")}` };
}
