/**
 * CPU time of the calling thread (Linux: /proc/self/task/<tid>/stat), so a benchmark can say how much work
 * one thread did apart from the time the machine gave to other processes. Node 20 has no per-thread CPU
 * clock; the main thread's task id is the process id. Undefined where /proc is not there.
 */
import { readdirSync, readFileSync } from "node:fs";
import { cpuSecondsOf } from "../tools/swarm/proc-stats.js";

/** Microseconds of user + system CPU time of the main thread so far (clock-tick resolution). */
export function mainThreadCpuUs(): number | undefined {
  const s = cpuSecondsOf(`/proc/self/task/${process.pid}/stat`);
  return s === undefined ? undefined : s * 1e6;
}

/**
 * CPU seconds (user + system) of each thread of process `pid` so far, summed by thread name (/proc/<pid>/task/<tid>/comm;
 * brine names its threads `brine-<name>`, thread-kit.ts); the main thread (tid = pid) as "main". Empty without /proc.
 */
export function threadCpuByName(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    let name: string;
    try {
      name = Number(tid) === pid ? "main" : readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim();
    } catch {
      continue;
    }
    out.set(name, (out.get(name) ?? 0) + (cpuSecondsOf(`/proc/${pid}/task/${tid}/stat`) ?? 0));
  }
  return out;
}
