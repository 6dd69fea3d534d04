/**
 * Restarts one master of a local two-master cluster (tools/local-cluster.ts) again and again and reports, per
 * round, the CPU its start cost and how it ended: the stress driver for "a master aborts at exit" (an exit by
 * a signal, or 'Napi::Error' on its stderr, is counted) and the figure for "the CPU a clustered master spends
 * starting" (/proc/<pid>/stat utime + stime of the whole process, every thread, at its "ready" line and 2 s
 * later, when the threads it starts after "ready" have settled), the wall time from its spawn to its "ready" line, and
 * the CPU of each of its threads at "ready" (/proc/<pid>/task/<tid>/stat: the main thread is the one whose id
 * is the process's; node does not name the others, so they are listed by CPU, the largest first).
 *   node dist/tools/master-restarts.js [--rounds N] [--lb 127.0.0.124] [--hosts 127.0.0.125,127.0.0.126] [--node-flags="--cpu-prof --cpu-prof-dir=DIR"]
 * With --node-flags="--cpu-prof --cpu-prof-dir=DIR" every master process and thread writes a CPU profile to DIR.
 * Prints one line per round and a summary with the load average; not a test (figures, on a shared box).
 */
import { readFileSync, readdirSync } from "node:fs";
import { parseArgs } from "node:util";
import { ClusterHarness } from "./local-cluster.js";

/** clock ticks per second of /proc's utime and stime (USER_HZ: 100 on Linux) */
const userHz = 100;

/** The CPU a process has used so far, ms (all its threads, live and ended). */
export function processCpuMs(pid: number): number {
  return cpuMsOfStat(`/proc/${pid}/stat`);
}

function cpuMsOfStat(file: string): number {
  const stat = readFileSync(file, "utf8");
  // the fields after the command (which may hold spaces) start after its closing parenthesis
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / userHz;
}

const { values } = parseArgs({ options: { rounds: { type: "string", default: "10" }, lb: { type: "string", default: "127.0.0.124" }, hosts: { type: "string", default: "127.0.0.125,127.0.0.126" }, "node-flags": { type: "string", default: "" } } });
const rounds = Number(values.rounds);

/** The CPU of each live thread of a process, ms, the main thread first, then the others by CPU (those above 10 ms). */
function threadCpuMs(pid: number): string {
  const rows: [number, number][] = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      rows.push([Number(tid), cpuMsOfStat(`/proc/${pid}/task/${tid}/stat`)]);
    } catch {
      // the thread ended while we read
    }
  }
  const main = rows.find(([t]) => t === pid)?.[1] ?? 0;
  const others = rows.filter(([t, ms]) => t !== pid && ms > 10).map(([, ms]) => ms).sort((a, b) => b - a);
  return `main ${main}, others ${others.join(" ")} (${rows.length} threads)`;
}
const hosts = values.hosts!.split(",");
const nodeFlags = values["node-flags"]!.split(" ").filter(Boolean);
const h = await ClusterHarness.start({ lbHost: values.lb!, hosts, nodeFlags });
const starts: number[] = [];
const settled: number[] = [];
const walls: number[] = [];
let aborted = 0;
try {
  for (let r = 1; r <= rounds; r++) {
    const i = 1 + ((r - 1) % (hosts.length - 1)); // never the founder: the cluster stays up
    const m = h.masters[i]!;
    h.kill(i, "SIGTERM");
    await h.waitExit(i, 30_000);
    const p = m.proc!;
    const tail = m.stderrTail ?? "";
    const bad = p.signalCode !== null || tail.includes("Napi::Error") || (p.exitCode ?? 0) !== 0;
    if (bad) aborted++;
    const ended = p.signalCode ? `signal ${p.signalCode}` : `exit ${p.exitCode}`;
    const t0 = performance.now();
    await h.startMaster(i);
    const wallMs = Math.round(performance.now() - t0);
    const pid = m.proc!.pid!;
    const atReady = processCpuMs(pid);
    const perThread = threadCpuMs(pid);
    walls.push(wallMs);
    await new Promise((res) => setTimeout(res, 2000));
    const later = processCpuMs(pid);
    starts.push(atReady);
    settled.push(later);
    process.stdout.write(`round ${r}: ${m.id} stopped (${ended}${tail.includes("Napi::Error") ? ", Napi::Error on stderr" : ""}); started: ${wallMs} ms to ready, ${atReady} ms CPU at ready (${perThread}), ${later} ms 2 s later; load ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}\n`);
    if (bad && tail) process.stdout.write(`  stderr: ${tail.slice(-600).replace(/\n/g, "\n  ")}\n`);
  }
} finally {
  await h.stop();
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
process.stdout.write(`${rounds} restarts: ${aborted} ended badly; wall to ready median ${median(walls)} ms; CPU per start median ${median(starts)} ms at ready, ${median(settled)} ms 2 s later (min ${Math.min(...starts)}, max ${Math.max(...starts)}); load ${readFileSync("/proc/loadavg", "utf8").trim()}\n`);
