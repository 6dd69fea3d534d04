/**
 * A process's CPU from /proc, thread by thread, for the cluster bench's per-commit figures (bench/cluster.ts):
 * what each master spent on a CPU, summed and by thread name.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

/**
 * Sum of /proc/<pid>/task/<tid>/schedstat over the threads of `pid` (ns on a CPU, ns waiting for one), and the
 * ns on a CPU by thread name (/proc/.../comm; the process's first thread as "main": Node's workers, libuv's
 * pool and V8's helpers are all "node", libzmq's are "ZMQbg/…", lmdb-js's write thread is its own).
 */
export function processSched(pid: number | "self" = "self"): { runNs: number; waitNs: number; byName: Record<string, number> } {
  let runNs = 0;
  let waitNs = 0;
  const byName: Record<string, number> = {};
  const main = String(pid === "self" ? process.pid : pid);
  try {
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      try {
        const [run, wait] = readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ").map(Number);
        runNs += run ?? 0;
        waitNs += wait ?? 0;
        const name = t === main ? "main" : readFileSync(`/proc/${pid}/task/${t}/comm`, "utf8").trim();
        byName[name] = (byName[name] ?? 0) + (run ?? 0);
      } catch {
        // the thread ended meanwhile
      }
    }
  } catch {
    // no /proc: zeros
  }
  return { runNs, waitNs, byName };
}

/** (b - a) per name, µs per commit for `n` commits; names whose threads ended meanwhile count from zero. */
export function byNameDelta(a: Record<string, number>, b: Record<string, number>, n: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(b)) out[k] = (v - (a[k] ?? 0)) / 1000 / n;
  return out;
}

/**
 * The per-name CPU of one master, busiest first. brine's threads name themselves (`brine-raft`, …:
 * thread-kit's nameThisThread), so what is left as `node` is libuv's pool (lmdb-js's async writes among its
 * work) and V8's platform threads; a build before the names had the Raft thread among the `node` threads, and
 * its own figure is taken out of them there.
 */
export function threadsLine(p: { threadsUs?: Record<string, number>; raftRunUs: number }): string {
  const t = { ...(p.threadsUs ?? {}) };
  if (t.node !== undefined && t["brine-raft"] === undefined) {
    t["Raft"] = p.raftRunUs;
    t["node (other)"] = t.node - p.raftRunUs;
    delete t.node;
  }
  return Object.entries(t)
    .filter(([, v]) => Math.abs(v) >= 1)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v.toFixed(0)}`)
    .join(", ");
}


/**
 * `perf record -g` of process `pid` into `file` until the returned stop() (SIGINT, then perf writes its file):
 * where a master's threads spend the commits' CPU, for `perf report -i file --sort tid,comm,dso,sym`. The
 * masters must run with `--perf-basic-prof` for JS frames to have names. Resolves stop() once perf exited.
 */
export function perfRecord(pid: number, file: string): { stop: () => Promise<void> } {
  const p = spawn("perf", ["record", "-g", "-s", "-F", "2000", "-o", file, "-p", String(pid)], { stdio: ["ignore", "ignore", "inherit"] });
  const exited = new Promise<void>((r) => p.once("exit", () => r()));
  p.once("error", (e) => process.stderr.write(`perf record: ${e.message}\n`));
  return {
    stop: async () => {
      p.kill("SIGINT");
      await exited;
    },
  };
}
