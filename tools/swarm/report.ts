/**
 * The swarm's report: every figure as JSON (`--json FILE`) and a human table. Sign-in figures count from
 * the storm's start (all minions started at once); job figures from the moment the publish request was
 * sent to the moment the master acknowledged each `_return`.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as zmq from "zeromq";
import { percentile, sortedNums, type Collector, type JobTrack } from "./collector.js";
import type { KeyPoolInfo } from "../../src/lib/minion/keys.js";
import type { MasterUsage } from "./proc-stats.js";
import type { WorkerUsage } from "./events.js";
import { minionId } from "./events.js";
import type { FdPlan } from "./fd-limit.js";
import type { ResolvedSwarmOptions } from "./swarm.js";

const missingIdsMax = 200;

export interface JobReport {
  jid: string;
  fun: string;
  expected: number;
  received: number;
  returned: number;
  /** returns from minions still starting when the job was published (not in `expected`) */
  extra_returns: number;
  failed: number;
  missing: number;
  publish_ms: number;
  first_return_ms: number | null;
  last_return_ms: number | null;
  return_p50_ms: number | null;
  return_p99_ms: number | null;
  delivery_p50_ms: number | null;
  missing_ids: string[];
}

export interface SwarmReport {
  scenario: string;
  protocol: string;
  master: string;
  minions: number;
  procs: number;
  authenticated: number;
  auth_failed: number;
  auth_per_s: number | null;
  auth_p50_ms: number | null;
  auth_p99_ms: number | null;
  auth_max_ms: number | null;
  time_to_all_accepted_ms: number | null;
  ready: number;
  ready_p50_ms: number | null;
  ready_p99_ms: number | null;
  time_to_all_ready_ms: number | null;
  published: number;
  expected_returns: number;
  returned: number;
  extra_returns: number;
  missing_returns: number;
  returns_per_s: number | null;
  first_return_ms: number | null;
  last_return_ms: number | null;
  return_p50_ms: number | null;
  return_p99_ms: number | null;
  jobs: JobReport[];
  churn: { rounds: number; reconnects: number; reconnect_failures: number; reconnect_p50_ms: number | null; reconnect_p99_ms: number | null } | null;
  errors: number;
  error_counts: Record<string, number>;
  error_list: { minion: string; kind: string; detail: string; at: string }[];
  error_list_truncated: boolean;
  auth_results: Record<string, number>;
  start_failures: Record<string, number>;
  bad_load_replies: number;
  request_timeouts: Record<string, number>;
  reauths: Record<string, number>;
  publish_drops: Record<string, number>;
  return_failures: number;
  publish_errors: string[];
  worker_errors: string[];
  master_process: MasterUsage | null;
  master_process_note?: string;
  swarm_process: { workers: WorkerUsage[]; rss_mb_total: number; cpu_s_total: number; fd_plan: { per_process: number; need: number; soft_limit: number | null } };
  key_pool: { dir: string; size: number; generated: number; reused: number; generate_ms: number };
  hardware: { cpus: number; cpu_model: string; mem_gb: number; arch: string; os: string; kernel: string; hostname: string };
  versions: { node: string; libzmq: string; zeromq_js: string; brine: string };
  options: Record<string, unknown>;
  started_at: string;
  duration_ms: number;
}

function r1(x: number | null): number | null {
  return x === null || !Number.isFinite(x) ? null : Math.round(x * 10) / 10;
}

function obj(m: Map<string, number>): Record<string, number> {
  return Object.fromEntries([...m.entries()].sort((a, b) => b[1] - a[1]));
}

/** The version in the nearest package.json named `name`, walking up from `fromDir`. */
function versionNear(fromDir: string, name: string): string | undefined {
  let dir = fromDir;
  for (let k = 0; k < 8; k++) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
      if (pkg.name === name) return String(pkg.version);
    } catch {
      // keep walking up
    }
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return undefined;
}

function pkgVersion(name: string): string {
  try {
    const from = name === "brine" ? path.dirname(fileURLToPath(import.meta.url)) : path.dirname(createRequire(import.meta.url).resolve(name));
    return versionNear(from, name) ?? versionNear(process.cwd(), name) ?? "unknown";
  } catch {
    return versionNear(process.cwd(), name) ?? "unknown";
  }
}

export function hardware(): SwarmReport["hardware"] {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpu_model: cpus[0]?.model?.trim() ?? "unknown",
    mem_gb: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    arch: os.arch(),
    os: `${os.type()} ${os.release()}`,
    kernel: os.release(),
    hostname: os.hostname(),
  };
}

export function versions(): SwarmReport["versions"] {
  return { node: process.version, libzmq: zmq.version, zeromq_js: pkgVersion("zeromq"), brine: pkgVersion("brine") };
}

function jobReport(j: JobTrack, idOf: (i: number) => string): JobReport {
  const lat = sortedNums([...j.returned.values()].map((at) => at - j.publishAt));
  const delivery = sortedNums([...j.received.values()].map((at) => at - j.publishAt));
  const missing: number[] = [];
  for (const i of j.expected) if (!j.returned.has(i)) missing.push(i);
  return {
    jid: j.jid,
    fun: j.fun,
    expected: j.expected.size,
    received: j.received.size,
    returned: j.returned.size,
    extra_returns: j.extra.size,
    failed: j.failed.size,
    missing: missing.length,
    publish_ms: r1(j.publishedAt - j.publishAt) ?? 0,
    first_return_ms: r1(lat[0] ?? null),
    last_return_ms: r1(lat[lat.length - 1] ?? null),
    return_p50_ms: r1(percentile(lat, 50)),
    return_p99_ms: r1(percentile(lat, 99)),
    delivery_p50_ms: r1(percentile(delivery, 50)),
    missing_ids: missing.slice(0, missingIdsMax).map(idOf),
  };
}

export interface ReportInput {
  options: ResolvedSwarmOptions;
  collector: Collector;
  stormStart: number;
  jobs: JobTrack[];
  keyPool: KeyPoolInfo;
  masterUsage: MasterUsage | null;
  masterPidGiven?: number;
  workers: WorkerUsage[];
  workerErrors: string[];
  publishErrors: string[];
  churnRounds: number;
  fdPlan: FdPlan;
  startedAt: Date;
}

export function buildReport(x: ReportInput): SwarmReport {
  const o = x.options;
  const c = x.collector;
  const idOf = (i: number) => minionId(o.settings, i);
  const auth = sortedNums(c.authMs);
  const ready = sortedNums(c.upMs);
  const authAts = sortedNums(c.authAt);
  const upAts = sortedNums(c.upAt);
  const authenticated = auth.length;
  const lastAuth = authAts.length ? authAts[authAts.length - 1]! - x.stormStart : null;
  const jobs = x.jobs.map((j) => jobReport(j, idOf));
  // missing returns become errors, listed with the minion and the jid
  for (const j of x.jobs) {
    for (const i of j.expected) {
      if (!j.returned.has(i) && !j.failed.has(i)) {
        c.error(i, "missing_return", `${j.fun} ${j.jid}: no return within ${o.jobTimeoutMs} ms${j.received.has(i) ? " (publish received)" : " (publish not received)"}`, Date.now());
      }
    }
  }
  const allLat = sortedNums(x.jobs.flatMap((j) => [...j.returned.values()].map((at) => at - j.publishAt)));
  const returned = x.jobs.reduce((s, j) => s + j.returned.size, 0);
  const expected = x.jobs.reduce((s, j) => s + j.expected.size, 0);
  const firstPublish = x.jobs.length ? Math.min(...x.jobs.map((j) => j.publishAt)) : 0;
  const lastAck = x.jobs.length ? Math.max(0, ...x.jobs.flatMap((j) => [...j.returned.values()])) : 0;
  const returnSpan = returned && lastAck > firstPublish ? (lastAck - firstPublish) / 1000 : null;
  const reconnect = sortedNums(c.reconnectMs);
  const rssTotal = x.workers.reduce((s, w) => s + w.rssMb, 0);
  const cpuTotal = x.workers.reduce((s, w) => s + w.cpuUserS + w.cpuSystemS, 0);
  const opts: Record<string, unknown> = { ...o, settings: undefined, rootKey: undefined, ...o.settings };
  delete opts.settings;
  delete opts.rootKey;
  const report: SwarmReport = {
    scenario: o.scenario,
    protocol: o.settings.protocol,
    master: `${o.master}:${o.settings.retPort}`,
    minions: o.minions,
    procs: o.procs,
    authenticated,
    auth_failed: o.minions - authenticated,
    auth_per_s: lastAuth && lastAuth > 0 ? r1((authenticated / lastAuth) * 1000) : null,
    auth_p50_ms: r1(percentile(auth, 50)),
    auth_p99_ms: r1(percentile(auth, 99)),
    auth_max_ms: r1(auth[auth.length - 1] ?? null),
    time_to_all_accepted_ms: authenticated === o.minions ? r1(lastAuth) : null,
    ready: ready.length,
    ready_p50_ms: r1(percentile(ready, 50)),
    ready_p99_ms: r1(percentile(ready, 99)),
    time_to_all_ready_ms: ready.length === o.minions && upAts.length ? r1(upAts[upAts.length - 1]! - x.stormStart) : null,
    published: x.jobs.length,
    expected_returns: expected,
    returned,
    extra_returns: x.jobs.reduce((s, j) => s + j.extra.size, 0),
    missing_returns: expected - returned,
    returns_per_s: returnSpan ? r1(returned / returnSpan) : null,
    first_return_ms: r1(allLat[0] ?? null),
    last_return_ms: jobs.length ? r1(Math.max(...jobs.map((j) => j.last_return_ms ?? 0))) : null,
    return_p50_ms: r1(percentile(allLat, 50)),
    return_p99_ms: r1(percentile(allLat, 99)),
    jobs,
    churn:
      o.scenario === "churn"
        ? { rounds: x.churnRounds, reconnects: reconnect.length, reconnect_failures: c.reconnectFailures, reconnect_p50_ms: r1(percentile(reconnect, 50)), reconnect_p99_ms: r1(percentile(reconnect, 99)) }
        : null,
    errors: c.errorCount,
    error_counts: obj(c.errorKinds),
    error_list: c.errors.map((e) => ({ ...e, at: new Date(e.at).toISOString() })),
    error_list_truncated: c.errorCount > c.errors.length,
    auth_results: obj(c.authResults),
    start_failures: obj(c.startFailures),
    bad_load_replies: c.badLoads,
    request_timeouts: obj(c.timeouts),
    reauths: obj(c.reauthReasons),
    publish_drops: obj(c.drops),
    return_failures: c.returnFailures,
    publish_errors: x.publishErrors,
    worker_errors: x.workerErrors,
    master_process: x.masterUsage,
    swarm_process: {
      workers: x.workers,
      rss_mb_total: Math.round(rssTotal),
      cpu_s_total: Math.round(cpuTotal * 10) / 10,
      fd_plan: { per_process: x.fdPlan.perProcess, need: x.fdPlan.need, soft_limit: x.fdPlan.limits && Number.isFinite(x.fdPlan.limits.soft) ? x.fdPlan.limits.soft : null },
    },
    key_pool: { dir: x.keyPool.dir, size: x.keyPool.size, generated: x.keyPool.generated, reused: x.keyPool.reused, generate_ms: x.keyPool.generateMs },
    hardware: hardware(),
    versions: versions(),
    options: opts,
    started_at: x.startedAt.toISOString(),
    duration_ms: Date.now() - x.startedAt.getTime(),
  };
  if (x.masterPidGiven && !x.masterUsage) report.master_process_note = `pid ${x.masterPidGiven} was not readable in /proc`;
  return report;
}

function fmt(v: number | null | undefined, unit = ""): string {
  if (v === null || v === undefined) return "—";
  return `${v.toLocaleString("en-US", { maximumFractionDigits: 1 })}${unit}`;
}

/** The human table. */
export function formatReport(r: SwarmReport): string {
  const rows: [string, string][] = [
    ["scenario", `${r.scenario} (${r.protocol}) against ${r.master}`],
    ["minions", `${r.minions} in ${r.procs} process${r.procs === 1 ? "" : "es"}${r.options.startupDelayMs ? `, started over ${Number(r.options.startupDelayMs) / 1000} s` : ", started at once"}`],
    ["authenticated", `${r.authenticated} / ${r.minions}${r.auth_failed ? `  (${r.auth_failed} failed)` : ""}`],
    ["auth rate", fmt(r.auth_per_s, " /s")],
    ["auth latency", `p50 ${fmt(r.auth_p50_ms, " ms")}  p99 ${fmt(r.auth_p99_ms, " ms")}  max ${fmt(r.auth_max_ms, " ms")}`],
    ["all accepted", fmt(r.time_to_all_accepted_ms, " ms")],
    ["ready (pillar+events)", `${r.ready}  p50 ${fmt(r.ready_p50_ms, " ms")}  p99 ${fmt(r.ready_p99_ms, " ms")}  all ${fmt(r.time_to_all_ready_ms, " ms")}`],
  ];
  if (r.published) {
    rows.push(
      ["jobs published", String(r.published)],
      ["returned", `${r.returned} / ${r.expected_returns}${r.missing_returns ? `  (${r.missing_returns} missing)` : ""}${r.extra_returns ? `  + ${r.extra_returns} from minions still starting` : ""}`],
      ["returns rate", fmt(r.returns_per_s, " /s")],
      ["return latency", `first ${fmt(r.first_return_ms, " ms")}  p50 ${fmt(r.return_p50_ms, " ms")}  p99 ${fmt(r.return_p99_ms, " ms")}  last ${fmt(r.last_return_ms, " ms")}`],
    );
  }
  if (r.churn) rows.push(["churn", `${r.churn.rounds} rounds, ${r.churn.reconnects} reconnects (${r.churn.reconnect_failures} failed), p50 ${fmt(r.churn.reconnect_p50_ms, " ms")} p99 ${fmt(r.churn.reconnect_p99_ms, " ms")}`]);
  rows.push(["errors", r.errors ? `${r.errors}: ${Object.entries(r.error_counts).map(([k, n]) => `${k} ${n}`).join(", ")}` : "none"]);
  if (r.bad_load_replies) rows.push(['"bad load" replies', String(r.bad_load_replies)]);
  if (Object.keys(r.request_timeouts).length) rows.push(["request timeouts", Object.entries(r.request_timeouts).map(([k, n]) => `${k} ${n}`).join(", ")]);
  if (Object.keys(r.reauths).length) rows.push(["re-auths", Object.entries(r.reauths).map(([k, n]) => `${n} (${k})`).join(", ")]);
  if (r.master_process) {
    const m = r.master_process;
    rows.push(["master process", `pid ${m.pid} (${m.processes} proc): RSS ${m.rss_mb_start} → ${m.rss_mb_end} MB (peak ${m.rss_mb_peak}), CPU ${m.cpu_s} s (${m.cpu_pct}%)`]);
  } else if (r.master_process_note) rows.push(["master process", r.master_process_note]);
  rows.push(
    ["swarm processes", `${r.swarm_process.workers.length} worker(s), RSS ${r.swarm_process.rss_mb_total} MB, CPU ${r.swarm_process.cpu_s_total} s`],
    ["key pool", `${r.key_pool.dir}: ${r.key_pool.reused} reused, ${r.key_pool.generated} generated`],
    ["hardware", `${r.hardware.cpus} × ${r.hardware.cpu_model}, ${r.hardware.mem_gb} GB, ${r.hardware.os}`],
    ["versions", `node ${r.versions.node}, libzmq ${r.versions.libzmq}, zeromq.js ${r.versions.zeromq_js}, brine ${r.versions.brine}`],
    ["duration", fmt(r.duration_ms, " ms")],
  );
  const w = Math.max(...rows.map(([k]) => k.length));
  const lines = rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`);
  if (r.error_list.length) {
    lines.push("", `first ${Math.min(10, r.error_list.length)} of ${r.errors} errors:`);
    for (const e of r.error_list.slice(0, 10)) lines.push(`  ${e.at}  ${e.minion || "-"}  ${e.kind}: ${e.detail}`);
  }
  return lines.join("\n") + "\n";
}
