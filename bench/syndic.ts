/**
 * Syndic bench (issue 18): brine-swarm minions behind two brine syndics under a brine master of masters —
 * MoM (order_masters) <- salt-syndic <- lower master <- N/2 swarm minions, twice — against the same N minions on
 * one master. Each side: one `test.ping` to all published with the root key, every return counted on the
 * publishing master's bus, the time from the publish to the last return, and the publishing master's CPU
 * (all its threads, from /proc) over that window, per return. N = 2,000 (`--full`: 5,000). Every process runs
 * on this box, so the figures include the swarm's and the other side's load. The minions share 100 keys (see
 * poolKeySlots in swarm.ts).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { poolKeySlots, poolMinionSettings, startBrineMaster, type BenchMaster } from "./swarm.js";
import type { BenchOptions, BenchRow } from "./types.js";
import { Fleet } from "../tools/swarm/fleet.js";
import { PublishClient, readRootKey } from "../tools/swarm/publish-client.js";
import { sampleTree } from "../tools/swarm/proc-stats.js";
import { DEFAULT_KEY_POOL_DIR, ensureKeyPool } from "../src/lib/minion/keys.js";
import { EventClient } from "../src/lib/client/event-client.js";

/** How long the sign-ins and the job may take, ms. */
const signInTimeoutMs = 600_000;
const jobTimeoutMs = 120_000;

/** `keys`: the fleet's own key pool, minion i on slot i (default: the shared pool, poolKeySlots keys for all). */
/**
 * `count` minions on `m`, all signed in (or the error says why not). `startInFlight`: at most that many starting at
 * once per swarm process (a storm paced by the master's answers); all at once without it.
 */
export async function fleetOn(m: BenchMaster, idPrefix: string, count: number, procs: number, keys?: { dir: string }, startInFlight?: number): Promise<Fleet> {
  const settings = poolMinionSettings(m.retPort, idPrefix, count, signInTimeoutMs);
  if (keys) Object.assign(settings, { keyDir: keys.dir, keySlots: 0 });
  const fleet = new Fleet({ settings, minions: count, procs });
  await fleet.init();
  if (startInFlight) fleet.startPaced(startInFlight);
  else fleet.startAll();
  await fleet.collector.waitFor(() => fleet.collector.settledCount() >= count, signInTimeoutMs);
  const up = fleet.collector.upIndices().length;
  if (up < count) {
    const c = fleet.collector;
    const why = `start failures ${JSON.stringify(Object.fromEntries(c.startFailures))}, errors ${JSON.stringify(Object.fromEntries(c.errorKinds))}; first of each kind: ${[...new Map(c.errors.map((e) => [e.kind, e])).values()].map((e) => `${e.minion} ${e.kind}: ${e.detail}`).join("; ")}`;
    await fleet.shutdown();
    throw new Error(`only ${up} of ${count} minions of ${idPrefix} signed in (${why})`);
  }
  return fleet;
}

export interface PingResult {
  returns: number;
  expected: number;
  lastReturnMs: number;
  cpuS: number;
}

/** One test.ping to `tgt` on `m`, its returns counted on m's bus; m's CPU from the publish to the last return. */
export async function ping(m: BenchMaster, expected: number, isMinion: (id: string) => boolean): Promise<PingResult> {
  const bus = new EventClient(m.sockDir);
  await bus.connect();
  const seen = new Set<string>();
  let jid: string | undefined;
  let last = 0;
  const early: { tag: string; at: number }[] = [];
  const count = (tag: string, at: number) => {
    const p = tag.split("/");
    if (p[2] !== jid || p[3] !== "ret") return;
    const id = p.slice(4).join("/");
    if (!isMinion(id) || seen.has(id)) return;
    seen.add(id);
    last = at;
  };
  bus.on((e) => {
    if (!e.tag.startsWith("salt/job/")) return;
    if (jid === undefined) early.push({ tag: e.tag, at: performance.now() });
    else count(e.tag, performance.now());
  });
  const { key, user } = readRootKey(m.rootKeyFile);
  const pc = new PublishClient({ host: "127.0.0.1", port: m.retPort, key, user, timeoutMs: 30_000, tries: 1 });
  try {
    const cpu0 = sampleTree(m.pid)!.cpuS;
    const t0 = performance.now();
    const reply = await pc.publish({ tgt: "*", tgt_type: "glob", fun: "test.ping", arg: [] });
    jid = reply.jid;
    for (const e of early) count(e.tag, e.at);
    const end = Date.now() + jobTimeoutMs;
    while (seen.size < expected && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    const cpu1 = sampleTree(m.pid)!.cpuS;
    return { returns: seen.size, expected, lastReturnMs: Math.round(last - t0), cpuS: cpu1 - cpu0 };
  } finally {
    pc.close();
    bus.close();
  }
}

function startSyndic(low: BenchMaster): ChildProcess {
  const cli = fileURLToPath(new URL("../src/cli/salt-syndic.js", import.meta.url));
  return spawn(process.execPath, [cli, "-c", low.configDir, "-l", "warning"], { stdio: ["ignore", "ignore", "inherit"] });
}

async function stopChild(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null) return;
  p.kill("SIGTERM");
  await new Promise((r) => {
    const t = setTimeout(() => (p.kill("SIGKILL"), r(undefined)), 15_000);
    p.once("exit", () => (clearTimeout(t), r(undefined)));
  });
}

function rows(side: string, r: PingResult, note: string): BenchRow[] {
  return [
    { figure: `${side}: returns on the publishing master`, value: r.returns, unit: "returns", target: r.expected, better: "higher", note },
    { figure: `${side}: publish to last return`, value: r.lastReturnMs, unit: "ms", better: "lower" },
    { figure: `${side}: publishing master CPU per return`, value: Math.round((r.cpuS / Math.max(1, r.returns)) * 1e6) / 1000, unit: "ms", better: "lower", note: `${r.cpuS.toFixed(2)} s CPU over the job` },
  ];
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const n = opts.full ? 5000 : 2000;
  const half = n / 2;
  const procs = Math.max(1, Math.min(4, Math.ceil(half / 1000)));
  await ensureKeyPool(poolKeySlots, { dir: DEFAULT_KEY_POOL_DIR });
  const out: BenchRow[] = [];
  const load = () => os.loadavg()[0]!.toFixed(1);

  // behind two syndics
  {
    const mom = await startBrineMaster({ id: "bench-mom", order_masters: true, syndic_wait: 1 });
    const lows: BenchMaster[] = [];
    const syndics: ChildProcess[] = [];
    const fleets: Fleet[] = [];
    try {
      for (const name of ["bench-low1", "bench-low2"]) {
        lows.push(await startBrineMaster({ id: name, syndic_master: `127.0.0.1:${mom.retPort}`, syndic_event_forward_timeout: 0.5, syndic_pidfile: "/run/salt-syndic.pid", syndic_log_file: "/log/syndic" }));
      }
      for (const low of lows) syndics.push(startSyndic(low));
      const end = Date.now() + 60_000;
      while (!lows.every((_, i) => existsSync(path.join(mom.pkiDir, "minions", `bench-low${i + 1}`))) && Date.now() < end) await new Promise((r) => setTimeout(r, 200));
      await new Promise((r) => setTimeout(r, 2000)); // their publish connections
      for (const [i, low] of lows.entries()) fleets.push(await fleetOn(low, `syn${i + 1}-`, half, procs));
      const r = await ping(mom, n, (id) => id.startsWith("syn"));
      out.push(...rows(`${n} minions behind 2 brine syndics, on the MoM`, r, `load ${load()}`));
    } finally {
      for (const f of fleets) await f.shutdown();
      for (const s of syndics) await stopChild(s);
      for (const l of lows) await l.stop();
      await mom.stop();
    }
  }
  // the same minions on one master
  {
    const m = await startBrineMaster({ id: "bench-single" });
    let fleet: Fleet | undefined;
    try {
      fleet = await fleetOn(m, "one-", n, procs * 2);
      const r = await ping(m, n, (id) => id.startsWith("one-"));
      out.push(...rows(`${n} minions on one master`, r, `load ${load()}`));
    } finally {
      await fleet?.shutdown();
      await m.stop();
    }
  }
  return out;
}
