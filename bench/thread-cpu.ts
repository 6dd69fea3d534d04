/**
 * CPU time of the calling thread (Linux: /proc/self/task/<tid>/stat), so a benchmark can say how much work
 * one thread did apart from the time the machine gave to other processes. Node 20 has no per-thread CPU
 * clock; the main thread's task id is the process id. Undefined where /proc is not there.
 */
import { cpuSecondsOf } from "../tools/swarm/proc-stats.js";

/** Microseconds of user + system CPU time of the main thread so far (clock-tick resolution). */
export function mainThreadCpuUs(): number | undefined {
  const s = cpuSecondsOf(`/proc/self/task/${process.pid}/stat`);
  return s === undefined ? undefined : s * 1e6;
}
