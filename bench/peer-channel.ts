/**
 * Peer channel figures: two transports in one process on loopback, 300-byte payloads (a Raft append or a
 * forwarded event), every message sealed with XChaCha20-Poly1305 and framed as CBOR.
 *
 * - one-way messages/s: the sender keeps its queue full (backing off on CLUSTER_PEER_QUEUE_FULL), timed
 *   until the receiver's handler has seen them all;
 * - round-trip p50/p99 with one request in flight (the latency a Raft append adds);
 * - requests/s with 64 in flight (pipelined Raft traffic);
 * - one complete handshake, sans-I/O (X25519 + RSA-2048 sign and verify on each side): paid per connection.
 *
 * Targets: Raft commit p50 <= 2 ms (reference-points.md, bottom line) leaves <= 1 ms for the round trip;
 * the channel must carry at least the 20k/s return/event rate the master is built for. Both processes share
 * the machine's cores with the benchmark driver, so these are lower bounds for two real hosts.
 * `node dist/bench/peer-channel.js [--full]` prints the rows alone.
 */
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import os from "node:os";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { InitiatorHandshake, ResponderHandshake } from "../src/workers/raft/peer/handshake.js";
import { StaticKeyring, type PeerIdentity } from "../src/shared/cluster-keys.js";
import { DEFAULT_PEER_LIMITS } from "../src/workers/raft/peer/limits.js";
import { PeerTransport } from "../src/workers/raft/peer/peer-transport.js";
import { isBrineError } from "../src/shared/errors.js";
import type { Logger } from "../src/shared/log.js";
import type { BenchOptions, BenchRow } from "./types.js";

const PAYLOAD_BYTES = 300;
const CLUSTER = "bench";
const quiet: Logger = { critical() {}, error() {}, warning() {}, info() {}, debug() {}, trace() {} };

function ident(id: string): PeerIdentity {
  const k = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { id, privateKey: k.privateKey, publicKey: k.publicKey };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

const round = (x: number, digits: number): number => Math.round(x * 10 ** digits) / 10 ** digits;
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Sends `n` messages as fast as the queue allows; resolves when the receiver counted them all. */
async function oneWay(a: PeerTransport, received: () => number, n: number): Promise<number> {
  const payload = new Uint8Array(PAYLOAD_BYTES).fill(7);
  const start = received();
  const t0 = performance.now();
  let sent = 0;
  while (sent < n) {
    try {
      a.send("b", "bench/msg", payload);
      sent++;
    } catch (e) {
      if (!isBrineError(e, "CLUSTER_PEER_QUEUE_FULL")) throw e;
      await tick();
    }
    if (sent % 512 === 0) await tick();
  }
  while (received() - start < n) await tick();
  return n / ((performance.now() - t0) / 1000);
}

async function roundTrips(a: PeerTransport, n: number): Promise<number[]> {
  const payload = new Uint8Array(PAYLOAD_BYTES).fill(1);
  const lat: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await a.request("b", "bench/echo", payload, 10_000);
    lat.push(performance.now() - t0);
  }
  return lat.sort((x, y) => x - y);
}

async function pipelined(a: PeerTransport, n: number, window: number): Promise<number> {
  const payload = new Uint8Array(PAYLOAD_BYTES).fill(2);
  let next = 0;
  const t0 = performance.now();
  const lane = async () => {
    while (next < n) {
      next++;
      await a.request("b", "bench/echo", payload, 10_000);
    }
  };
  await Promise.all(Array.from({ length: window }, lane));
  return n / ((performance.now() - t0) / 1000);
}

function handshakeMs(a: PeerIdentity, b: PeerIdentity, keys: Map<string, KeyObject>, n: number): number {
  const ring = new StaticKeyring(keys);
  const ctx = (self: PeerIdentity) => ({ clusterId: CLUSTER, self, keyring: ring, limits: DEFAULT_PEER_LIMITS });
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const init = new InitiatorHandshake(ctx(a), "b");
    const resp = new ResponderHandshake(ctx(b));
    init.onConfirm(resp.onAuth(init.onWelcome(resp.onHello(init.hello))).confirm);
  }
  return (performance.now() - t0) / n;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const load = os.loadavg()[0]!.toFixed(1);
  const a = ident("a");
  const b = ident("b");
  const keys = new Map<string, KeyObject>([
    ["a", a.publicKey],
    ["b", b.publicKey],
  ]);
  const tb = new PeerTransport({ clusterId: CLUSTER, selfId: "b", listen: { host: "127.0.0.1", port: 0 }, peers: [], keys: { self: b, keyring: new StaticKeyring(keys) }, log: quiet });
  await tb.start();
  const ta = new PeerTransport({
    clusterId: CLUSTER,
    selfId: "a",
    listen: { host: "127.0.0.1", port: 0 },
    peers: [{ id: "b", host: "127.0.0.1", port: tb.port }],
    keys: { self: a, keyring: new StaticKeyring(keys) },
    log: quiet,
  });
  let count = 0;
  tb.on("bench/msg", () => {
    count++;
  });
  tb.on("bench/echo", (m) => m.payload);
  try {
    await ta.start();
    const deadline = Date.now() + 10_000;
    while (!ta.isUp("b")) {
      if (Date.now() > deadline) throw new Error("peer channel bench: no session within 10 s");
      await new Promise((r) => setTimeout(r, 5));
    }
    const messages = opts.full ? 500_000 : 100_000;
    const trips = opts.full ? 20_000 : 3_000;
    const piped = opts.full ? 200_000 : 40_000;
    await oneWay(ta, () => count, 5_000); // warm-up: JIT, zmq buffers
    const msgRate = await oneWay(ta, () => count, messages);
    await roundTrips(ta, 500);
    const lat = await roundTrips(ta, trips);
    const reqRate = await pipelined(ta, piped, 64);
    const hs = handshakeMs(a, b, keys, opts.full ? 200 : 40);
    return [
      {
        figure: "peer channel one-way messages, 300 B",
        value: Math.round(msgRate),
        unit: "msg/s",
        target: 20_000,
        better: "higher",
        note: `${messages.toLocaleString("en-US")} msgs, sealed + CBOR, 2 transports in 1 process, load ${load}`,
      },
      {
        figure: "peer channel round trip p50, 300 B, 1 in flight",
        value: round(percentile(lat, 0.5), 3),
        unit: "ms",
        target: 1,
        better: "lower",
        note: `p99 ${round(percentile(lat, 0.99), 3)} ms over ${trips.toLocaleString("en-US")} requests`,
      },
      {
        figure: "peer channel requests, 300 B, 64 in flight",
        value: Math.round(reqRate),
        unit: "req/s",
        target: 20_000,
        better: "higher",
        note: `${piped.toLocaleString("en-US")} correlated request/response pairs`,
      },
      {
        figure: "peer channel handshake (X25519 + RSA-2048 both sides)",
        value: round(hs, 2),
        unit: "ms",
        better: "lower",
        note: "once per connection, never per message",
      },
    ];
  } finally {
    await ta.close();
    await tb.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const r of await run({ full: process.argv.includes("--full") })) {
    console.log(`${r.figure}: ${r.value} ${r.unit}${r.target !== undefined ? ` (target ${r.target})` : ""}${r.note ? ` — ${r.note}` : ""}`);
  }
  process.exit(0);
}
