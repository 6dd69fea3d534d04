/**
 * What a sign-in costs a Node master at the least (issue 17: "within 1.25× of the RSA bound per auth"), so that
 * cpu-per-op's figure for brine can be read against what Node itself needs, on the same box, in the same run:
 *
 * - a server process (bench/signin-floor-server.ts) on the master's CPU does only the sign-in's own work: brine's
 *   ZMTP ROUTER over Node's `net` (a returning minion opens a connection for each sign-in, salt/crypt.py
 *   `AsyncAuth.sign_in`), the request's msgpack, the three RSA operations of the bound, the reply packed and
 *   signed. Two ways: **inline** (all of it on the main thread: no thread hop at all, so a design a master cannot
 *   use, since one sign-in's RSA would hold every other request for a millisecond) and **hop** (the work in one
 *   worker thread behind a bare MessagePort, batched per turn of the event loop: the cheapest form of brine's
 *   design, a thread that owns the sockets and threads that do the crypto);
 * - this process on the other CPU is the minions: a libzmq REQ socket per sign-in, as brine-swarm's and Salt's
 *   minions (one `_auth` with a token OAEP-encrypted to the master's key, the reply, a close), `inFlight` at once,
 *   over a pool of minion keys;
 * - the server's CPU from /proc (every thread), its idle rate taken off, per sign-in, by round after a warm-up;
 *   the RSA bound as cpu-per-op measures it (its `rsaBoundS`), on the master's CPU, before and after each way.
 *
 * The ratio of each way to the bound is the floor of any master on that design: brine's cpu-per-op figure over it
 * is what brine adds.
 */
import { spawn } from "node:child_process";
import { constants, generateKeyPairSync, publicEncrypt, randomBytes, type KeyObject } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { pack } from "msgpackr";
import * as zmq from "zeromq";
import { cpuSecondsOf } from "../tools/swarm/proc-stats.js";
import { boundOnMasterCpus, masterAndSwarmCpus, median, pin } from "./cpu-per-op.js";
import type { BenchOptions, BenchRow } from "./types.js";

const inFlight = 8;
const minionKeys = 20;
const warmSignIns = 2_000;
/** measured rounds and sign-ins per round (`--full`: more rounds) */
const rounds = 6;
const roundsFull = 12;
const perRound = 500;
const idleWindowMs = 3_000;
/** sign-ins' worth of RSA work per measure of the bound, one measure before each round */
const boundRoundsEach = 60;
const SERVER = fileURLToPath(new URL("./signin-floor-server.js", import.meta.url));

interface Minion {
  id: string;
  pub: string;
}

/**
 * One sign-in as a minion makes it: a libzmq REQ socket of its own (salt/crypt.py `AsyncAuth.sign_in` opens a
 * request channel and closes it after), so the server sees libzmq's handshake in its packets, the request, the
 * reply, the close.
 */
async function signIn(port: number, body: Buffer): Promise<void> {
  const sock = new zmq.Request({ linger: 0 });
  try {
    sock.connect(`tcp://127.0.0.1:${port}`);
    await sock.send(body);
    await sock.receive();
  } finally {
    sock.close();
  }
}

function authBody(master: KeyObject, m: Minion): Buffer {
  const token = publicEncrypt({ key: master, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha1" }, randomBytes(32));
  return pack({ enc: "clear", load: { cmd: "_auth", id: m.id, pub: m.pub, token, nonce: randomBytes(16).toString("hex") } });
}

async function signIns(port: number, master: KeyObject, minions: Minion[], n: number): Promise<void> {
  let started = 0;
  const lane = async () => {
    while (started < n) {
      const m = minions[started++ % minions.length]!;
      await signIn(port, authBody(master, m));
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
}

const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
const cpuOf = (pid: number) => cpuSecondsOf(`/proc/${pid}/stat`) ?? NaN;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface WayResult {
  way: string;
  roundsUs: number[];
  boundUs: number;
  /** each round's CPU per sign-in over the bound measured just before it */
  ratios: number[];
}

async function measureWay(way: "inline" | "hop", keyFile: string, master: KeyObject, minions: Minion[], nRounds: number, cpus: { master?: string; swarm?: string }): Promise<WayResult> {
  const args = [SERVER, keyFile, way];
  const child = cpus.master ? spawn("taskset", ["-c", cpus.master, process.execPath, ...args], { stdio: ["ignore", "pipe", "inherit"] }) : spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once("line", (l) => resolve(Number(l)));
      child.once("exit", (code) => reject(new Error(`the sign-in floor's server exited (${code})`)));
    });
    // taskset runs node in its own process (exec): its pid is the child's
    const pid = child.pid!;
    const i0 = cpuOf(pid);
    const t0 = performance.now();
    await sleep(idleWindowMs);
    const idlePerMs = (cpuOf(pid) - i0) / (performance.now() - t0);
    await signIns(port, master, minions, warmSignIns);
    // the bound before every round: on a shared box the same RSA work costs more CPU time on a busier core, and
    // a bound taken minutes away from a round was seen to differ from it by a fifth
    const roundsUs: number[] = [];
    const boundsUs: number[] = [];
    for (let r = 0; r < nRounds; r++) {
      boundsUs.push(boundOnMasterCpus(cpus, boundRoundsEach) * 1e6);
      const c0 = cpuOf(pid);
      const w0 = performance.now();
      await signIns(port, master, minions, perRound);
      const cpu = cpuOf(pid) - c0 - idlePerMs * (performance.now() - w0);
      roundsUs.push((cpu / perRound) * 1e6);
    }
    const boundUs = mean(boundsUs);
    const ratios = roundsUs.map((u, i) => u / boundsUs[i]!);
    return { way, roundsUs, boundUs, ratios };
  } finally {
    child.kill("SIGKILL");
  }
}


export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const cpus = masterAndSwarmCpus();
  const dir = mkdtempSync(path.join(os.tmpdir(), "signin-floor-"));
  const load = () => os.loadavg()[0]!.toFixed(1);
  if (cpus.swarm) pin(process.pid, cpus.swarm);
  try {
    const master = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const keyFile = path.join(dir, "master.pem");
    writeFileSync(keyFile, master.privateKey.export({ type: "pkcs1", format: "pem" }));
    const minions = Array.from({ length: minionKeys }, (_, i) => ({
      id: `floor-${i}`,
      pub: generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey.export({ type: "spki", format: "pem" }).toString(),
    }));
    const rows: BenchRow[] = [];
    const where = cpus.master ? `server on CPU ${cpus.master}, minions on CPU ${cpus.swarm} (taskset)` : "NOT pinned: server and minions share the CPUs";
    for (const way of ["inline", "hop"] as const) {
      const l0 = load();
      const r = await measureWay(way, keyFile, master.publicKey, minions, opts.full ? roundsFull : rounds, cpus);
      const all = mean(r.roundsUs);
      const what = way === "inline" ? "all on the main thread" : "crypto in a worker behind a bare MessagePort";
      rows.push({
        figure: `sign-in floor (${way}: ${what}): server CPU per sign-in / RSA bound`,
        value: Math.round(median(r.ratios) * 100) / 100,
        unit: "×",
        target: 1.25,
        better: "lower",
        note: `median of ${r.ratios.length} rounds, each over the bound measured just before it (${r.ratios.map((x) => x.toFixed(2)).join(" ")}); ${Math.round(all)} µs a sign-in, bound ${Math.round(r.boundUs)} µs (means); ${warmSignIns} sign-ins untimed, ${perRound} a round, ${inFlight} in flight, a libzmq REQ socket each; ${where}; load ${l0} → ${load()}`,
      });
    }
    return rows;
  } finally {
    if (cpus.swarm) pin(process.pid, cpus.all);
    rmSync(dir, { recursive: true, force: true });
  }
}
