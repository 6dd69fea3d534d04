/**
 * CPU time of the calling thread (Linux: /proc/self/task/<tid>/stat, clock ticks of 10 ms), so a
 * benchmark can say how much work one thread did apart from the time the machine gave to other
 * processes. Node 20 has no per-thread CPU clock; the main thread's task id is the process id.
 * Undefined where /proc is not there.
 */
import { readFileSync } from "node:fs";

/** Microseconds of user + system CPU time of the main thread so far. */
export function mainThreadCpuUs(): number | undefined {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // after the command name: state is field 3; utime and stime are fields 14 and 15 (man 5 proc)
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * 10_000 : undefined;
  } catch {
    return undefined;
  }
}
