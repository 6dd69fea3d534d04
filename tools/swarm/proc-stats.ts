/**
 * RSS and CPU of a local master process and all its descendants (a Python salt-master is a tree of
 * processes; brine is one process with threads), read from /proc at the start, every second, and at the
 * end of a run.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

let clkTck: number | undefined;
function ticksPerSecond(): number {
  if (clkTck === undefined) {
    try {
      clkTck = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      clkTck = 100;
    }
  }
  return clkTck;
}

interface Stat {
  pid: number;
  ppid: number;
  ticks: number;
}

/** ppid and user + system clock ticks from a `/proc/.../stat` file (a process's or a thread's). */
function parseStat(file: string): { ppid: number; ticks: number } {
  const s = readFileSync(file, "utf8");
  const rest = s.slice(s.lastIndexOf(")") + 2).split(" ");
  // fields after the name: state(0) ppid(1) … utime(11) stime(12)
  return { ppid: Number(rest[1]), ticks: Number(rest[11]) + Number(rest[12]) };
}

/** CPU seconds (user + system) a process or thread has used, from its `/proc/.../stat`; undefined if unreadable. */
export function cpuSecondsOf(statFile: string): number | undefined {
  try {
    return parseStat(statFile).ticks / ticksPerSecond();
  } catch {
    return undefined;
  }
}

/** User and system CPU seconds of a process or thread, apart, from its `/proc/.../stat`; undefined if unreadable. */
export function cpuSplitOf(statFile: string): { user: number; system: number } | undefined {
  try {
    const s = readFileSync(statFile, "utf8");
    const rest = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return { user: Number(rest[11]) / ticksPerSecond(), system: Number(rest[12]) / ticksPerSecond() };
  } catch {
    return undefined;
  }
}

function readStat(pid: number): Stat | undefined {
  try {
    return { pid, ...parseStat(`/proc/${pid}/stat`) };
  } catch {
    return undefined;
  }
}

function rssKb(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

export interface TreeSample {
  at: number;
  rssKb: number;
  cpuS: number;
  processes: number;
}

/** One sample of `pid` and its descendants; undefined when the process is gone. */
export function sampleTree(pid: number): TreeSample | undefined {
  const root = readStat(pid);
  if (!root) return undefined;
  const all: Stat[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const st = readStat(Number(name));
    if (st) all.push(st);
  }
  const children = new Map<number, number[]>();
  for (const st of all) {
    let l = children.get(st.ppid);
    if (!l) children.set(st.ppid, (l = []));
    l.push(st.pid);
  }
  const byPid = new Map(all.map((s) => [s.pid, s]));
  let ticks = 0;
  let rss = 0;
  let n = 0;
  const stack = [pid];
  const seen = new Set<number>();
  while (stack.length) {
    const p = stack.pop()!;
    if (seen.has(p)) continue;
    seen.add(p);
    const st = p === pid ? root : byPid.get(p);
    if (!st) continue;
    ticks += st.ticks;
    rss += rssKb(p);
    n++;
    for (const c of children.get(p) ?? []) stack.push(c);
  }
  return { at: Date.now(), rssKb: rss, cpuS: ticks / ticksPerSecond(), processes: n };
}

export interface MasterUsage {
  pid: number;
  processes: number;
  rss_mb_start: number;
  rss_mb_peak: number;
  rss_mb_end: number;
  cpu_s: number;
  /** CPU seconds per wall second × 100 (can exceed 100 on several cores) */
  cpu_pct: number;
  wall_s: number;
}

export class ProcMonitor {
  private first: TreeSample | undefined;
  private last: TreeSample | undefined;
  private peakKb = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(readonly pid: number) {}

  start(intervalMs = 1000): boolean {
    this.first = sampleTree(this.pid);
    if (!this.first) return false;
    this.last = this.first;
    this.peakKb = this.first.rssKb;
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
    return true;
  }

  private sample(): void {
    const s = sampleTree(this.pid);
    if (!s) return;
    this.last = s;
    this.peakKb = Math.max(this.peakKb, s.rssKb);
  }

  stop(): MasterUsage | null {
    if (this.timer) clearInterval(this.timer);
    this.sample();
    if (!this.first || !this.last) return null;
    const wall = Math.max(0.001, (this.last.at - this.first.at) / 1000);
    const cpu = this.last.cpuS - this.first.cpuS;
    const mb = (kb: number) => Math.round((kb / 1024) * 10) / 10;
    return {
      pid: this.pid,
      processes: this.last.processes,
      rss_mb_start: mb(this.first.rssKb),
      rss_mb_peak: mb(this.peakKb),
      rss_mb_end: mb(this.last.rssKb),
      cpu_s: Math.round(cpu * 100) / 100,
      cpu_pct: Math.round((cpu / wall) * 1000) / 10,
      wall_s: Math.round(wall * 10) / 10,
    };
  }
}
