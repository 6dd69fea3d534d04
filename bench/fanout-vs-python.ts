/**
 * Publish fan-out against the Python master, in one run (issue 17: every figure also as a ratio against the Python
 * master where it can do the same work). publish-fanout measures brine's PublishPort in process; this one measures
 * both masters from the outside, the same way:
 *
 * - each master starts with `BRINE_BENCH_FANPY_SUBS` (1,000; `--full` 5,000) accepted minion keys in its pki
 *   directory (one public key under every id, so a `*` publish expects them all), pinned to CPU 0 as cpu-per-op
 *   pins (brine: its process; Python: the harness's master and every process it forks);
 * - as many of the bench's lean ZMTP SUB readers (publish-fanout's child processes, pinned to CPU 1 with this
 *   process) connect to its publish port and subscribe to everything;
 * - a round is one `test.ping` to `*` published as Salt's `salt` CLI publishes (tools/swarm/publish-client.ts: the
 *   clear `publish` request with the root key on the request port), timed from just before the request leaves to
 *   the moment the last reader has the frame (and the first); each round's argument is 64 bytes longer than the
 *   last one's, so the readers tell the rounds' frames apart;
 * - the master's CPU per publish is its whole process tree's (/proc) over the rounds, 50 ms apart, minus nothing:
 *   neither master has anything else to do.
 *
 * Nobody answers the pings (the readers are not minions): the figure is the publish and its delivery only. Skipped
 * for Python, with the reason, without SALT_GIT_DIR or the harness (../shared/real-salt/README.md).
 */
import { generateKeyPairSync } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterAndSwarmCpus, pin, pythonAvailable, startPythonMaster } from "./cpu-per-op.js";
import { FANOUT_GOAL_MS, Kid, raisePriority, until } from "./publish-fanout.js";
import { startBrineMaster } from "./swarm.js";
import type { BenchOptions, BenchRow } from "./types.js";
import { PublishClient, readRootKey } from "../tools/swarm/publish-client.js";
import { sampleTree } from "../tools/swarm/proc-stats.js";
import { threadCpuByName } from "./thread-cpu.js";

/** subscribers per reader process */
const SUBS_PER_KID = 1250;
/** how long every reader may take to join (a PUB drops what it sends before a subscriber joined), ms */
const joinTimeoutMs = 300_000;
/** one round's delivery to every reader, ms */
const roundTimeoutMs = 30_000;
const roundGapMs = 50;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const loadavg = () => os.loadavg().map((l) => l.toFixed(1)).join(" ");

interface FanTarget {
  name: string;
  pid: number;
  retPort: number;
  publishPort: number;
  rootKeyFile: string;
  stop(): Promise<void>;
}

interface FanFigures {
  /** per round: request sent → last / first reader has the frame; → the publish request answered, ms */
  last: number[];
  first: number[];
  replied: number[];
  /** the master's process tree, CPU ms per publish over the rounds */
  masterCpuMs: number;
  readersCpuMs: number;
  /** brine: the master's CPU ms per publish by thread name, the largest first ("" for Python) */
  threads: string;
  niced: boolean;
  joinS: number;
  load: string;
}

function subsToRun(opts: BenchOptions): number {
  const v = process.env.BRINE_BENCH_FANPY_SUBS;
  if (v === undefined) return opts.full ? 5000 : 1000;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 8000) throw new Error(`BRINE_BENCH_FANPY_SUBS: a whole number of subscribers from 1 to 8,000, not ${JSON.stringify(v)}`);
  return n;
}

/** `n` accepted minion keys (`fanpy-00001`…), all the same public key, in `pkiDir/minions`. */
function seedAccepted(n: number): (pkiDir: string) => void {
  const pub = generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey.export({ type: "spki", format: "pem" }) as string;
  return (pkiDir) => {
    const dir = path.join(pkiDir, "minions");
    mkdirSync(dir, { recursive: true });
    for (let i = 1; i <= n; i++) writeFileSync(path.join(dir, `fanpy-${String(i).padStart(5, "0")}`), pub);
  };
}

async function measure(t: FanTarget, subs: number, rounds: number, cpus: { swarm?: string }): Promise<FanFigures> {
  const kidsN = Math.max(1, Math.ceil(subs / SUBS_PER_KID));
  const kids = Array.from({ length: kidsN }, () => new Kid());
  const { key, user } = readRootKey(t.rootKeyFile);
  const pc = new PublishClient({ host: "127.0.0.1", port: t.retPort, key, user, timeoutMs: 30_000, tries: 1 });
  try {
    if (cpus.swarm) for (const k of kids) pin(k.p.pid!, cpus.swarm);
    const niced = raisePriority() && kids.every((k) => raisePriority(k.p.pid));
    kids.forEach((k, i) => k.send({ k: "subs", port: t.publishPort, n: Math.floor(subs / kidsN) + (i < subs % kidsN ? 1 : 0), lean: true }));
    await Promise.all(kids.map((k) => k.next("connected")));
    // warm-up: publish until every reader has had one
    const warm = Promise.all(kids.map((k) => k.next("warm", joinTimeoutMs)));
    let warmDone = false;
    void warm.then(() => (warmDone = true));
    const t0 = Date.now();
    while (!warmDone) {
      await pc.publish({ tgt: "*", fun: "test.ping", arg: [] });
      await Promise.race([warm, sleep(200)]);
      if (Date.now() - t0 > joinTimeoutMs) throw new Error(`${t.name}: the readers did not all join in ${joinTimeoutMs / 1000} s`);
    }
    const joinS = (Date.now() - t0) / 1000;
    await sleep(500);
    kids.forEach((k) => k.send({ k: "reset" }));
    await Promise.all(kids.map((k) => k.next("reset")));
    const last: number[] = [];
    const first: number[] = [];
    const replied: number[] = [];
    const load0 = loadavg();
    const treeCpu = () => sampleTree(t.pid)?.cpuS ?? NaN;
    const kidsCpu = () => kids.reduce((a, k) => a + (sampleTree(k.p.pid!)?.cpuS ?? NaN), 0);
    const m0 = treeCpu();
    const k0 = kidsCpu();
    const th0 = threadCpuByName(t.pid);
    for (let r = 0; r < rounds; r++) {
      const start = process.hrtime.bigint();
      const reply = await pc.publish({ tgt: "*", fun: "test.ping", arg: ["p".repeat(256 + 64 * r)] });
      replied.push(Number(process.hrtime.bigint() - start) / 1e6);
      if (reply.minions.length !== subs) throw new Error(`${t.name}: the publish expected ${reply.minions.length} minions, not ${subs}`);
      if (!(await until(() => kids.every((k) => k.roundsSeen.length > r), roundTimeoutMs))) throw new Error(`${t.name}, round ${r}: not every reader got the publish in ${roundTimeoutMs / 1000} s`);
      const seen = kids.map((k) => k.roundsSeen[r]!);
      if (new Set(seen.map((x) => x.len)).size !== 1) throw new Error(`${t.name}, round ${r}: the readers saw frames of different lengths`);
      last.push(Number(seen.reduce((a, s) => (s.last > a ? s.last : a), 0n) - start) / 1e6);
      first.push(Number(seen.reduce((a, s) => (s.first < a ? s.first : a), seen[0]!.first) - start) / 1e6);
      await sleep(roundGapMs);
    }
    const masterCpuMs = ((treeCpu() - m0) * 1000) / rounds;
    const readersCpuMs = ((kidsCpu() - k0) * 1000) / rounds;
    // by thread: brine's master is one process (Python's is a tree of processes, whose figure is the total above)
    const threads = t.name === "brine" ? perThread(th0, threadCpuByName(t.pid), rounds) : "";
    return { last, first, replied, masterCpuMs, readersCpuMs, threads, niced, joinS, load: `${load0} -> ${loadavg()}` };
  } finally {
    pc.close();
    kids.forEach((k) => k.stop());
  }
}

/** "main 60.1, brine-publisher 3.2, …" ms per publish, the largest first, threads under 0.5 ms left out. */
function perThread(a: Map<string, number>, b: Map<string, number>, rounds: number): string {
  return [...b]
    .map(([k, v]) => [k, ((v - (a.get(k) ?? 0)) * 1000) / rounds] as const)
    .filter(([, ms]) => ms >= 0.5)
    .sort((x, y) => y[1] - x[1])
    .map(([k, ms]) => `${k} ${ms.toFixed(1)}`)
    .join(", ");
}

function describe(f: FanFigures, subs: number, rounds: number): string {
  return `${subs.toLocaleString("en-US")} lean ZMTP readers, ${rounds} rounds ${roundGapMs} ms apart; first reader ${median(f.first).toFixed(1)} ms, the publish request answered ${median(f.replied).toFixed(1)} ms, slowest round ${Math.max(...f.last).toFixed(1)} ms; master CPU ${f.masterCpuMs.toFixed(1)} ms per publish (its process tree, 10 ms ticks${f.threads ? `; by thread: ${f.threads}` : ""}), the readers ${f.readersCpuMs.toFixed(1)} ms; all joined in ${f.joinS.toFixed(1)} s; ${f.niced ? "readers at nice -10" : "nice 0"}; load ${f.load}`;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const subs = subsToRun(opts);
  const rounds = opts.full ? 30 : 20;
  const cpus = masterAndSwarmCpus();
  if (cpus.swarm) pin(process.pid, cpus.swarm);
  const where = cpus.master ? `master on CPU ${cpus.master}, readers and this process on CPU ${cpus.swarm}` : "not pinned (the box cannot)";
  const seed = seedAccepted(subs);
  const rows: BenchRow[] = [];
  try {
    const m = await startBrineMaster({}, { cpus: cpus.master, seed });
    let brine: FanFigures;
    try {
      brine = await measure({ name: "brine", pid: m.pid, retPort: m.retPort, publishPort: m.publishPort, rootKeyFile: m.rootKeyFile, stop: () => m.stop() }, subs, rounds, cpus);
    } finally {
      await m.stop();
    }
    rows.push({ figure: `fan-out vs Python: brine, publish to the last of ${subs.toLocaleString("en-US")} subscribers (median)`, value: median(brine.last), unit: "ms", target: FANOUT_GOAL_MS, better: "lower", note: `${describe(brine, subs, rounds)}; ${where}` });
    const why = pythonAvailable();
    if (why) {
      rows.push({ figure: "fan-out vs Python: Python master", value: NaN, unit: "", note: `skipped: ${why}` });
      return rows;
    }
    const p = await startPythonMaster(cpus.master, seed);
    let py: FanFigures;
    try {
      py = await measure({ ...p, publishPort: p.publishPort! }, subs, rounds, cpus);
    } finally {
      await p.stop();
    }
    rows.push({ figure: `fan-out vs Python: Python 3007, publish to the last of ${subs.toLocaleString("en-US")} subscribers (median)`, value: median(py.last), unit: "ms", note: `${describe(py, subs, rounds)}; ${where}` });
    rows.push({ figure: "fan-out vs Python: brine / Python, to the last subscriber", value: median(brine.last) / median(py.last), unit: "×", better: "lower", note: `${median(brine.last).toFixed(1)} / ${median(py.last).toFixed(1)} ms; master CPU per publish ${brine.masterCpuMs.toFixed(1)} / ${py.masterCpuMs.toFixed(1)} ms (${(brine.masterCpuMs / py.masterCpuMs).toFixed(2)})` });
    return rows;
  } finally {
    if (cpus.swarm) pin(process.pid, cpus.all);
  }
}
