/**
 * Shared set-up for the peer channel tests: RSA identities (generated once per process), keyrings, a
 * logger that records what it is told, transports on loopback ports, and waits with deadlines (a loaded
 * machine makes everything slow; nothing here waits forever).
 */
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import type { EventEmitter } from "node:events";
import { StaticKeyring, type PeerIdentity } from "../../src/shared/cluster-keys.js";
import type { PeerLimits } from "../../src/workers/raft/peer/limits.js";
import { PeerTransport, type PeerEndpoint } from "../../src/workers/raft/peer/peer-transport.js";
import type { Logger } from "../../src/shared/log.js";
import type { StageSink } from "../../src/shared/metrics/stage-clock.js";
import { after } from "node:test";
import { freePort } from "../../tools/free-port.js";
export { freePort };

export const CLUSTER = "brine-test";

/** A loopback port nobody listens on right now (the kernel picks it; the probe is closed before returning). */

/** Every transport a test started; closed after the file's tests even if a test failed half-way. */
const live = new Set<PeerTransport>();
after(async () => {
  for (const t of live) await t.close();
});

/** Fast reconnects and short waits, still generous for a machine under load. */
export const FAST_LIMITS: Partial<PeerLimits> = {
  reconnectMinMs: 20,
  reconnectMaxMs: 200,
  handshakeTimeoutMs: 3000,
  heartbeatIntervalMs: 200,
  heartbeatTimeoutMs: 2000,
  timerTickMs: 5,
};

const keys = new Map<string, { privateKey: KeyObject; publicKey: KeyObject }>();

/** An RSA-2048 key pair, one per name for the whole process. */
export function keyPair(name: string): { privateKey: KeyObject; publicKey: KeyObject } {
  let k = keys.get(name);
  if (!k) {
    k = generateKeyPairSync("rsa", { modulusLength: 2048 });
    keys.set(name, k);
  }
  return k;
}

/** The identity of node `id`, holding the key named `keyName` (default: its own). */
export function identity(id: string, keyName = id): PeerIdentity {
  const k = keyPair(keyName);
  return { id, privateKey: k.privateKey, publicKey: k.publicKey };
}

/** A keyring with the genuine public key of each id. */
export function keyringOf(ids: string[]): StaticKeyring {
  return new StaticKeyring(ids.map((id) => [id, keyPair(id).publicKey] as [string, KeyObject]));
}

export interface LogLine {
  level: string;
  msg: string;
}

/** A Logger that keeps every line (and prints nothing). */
export class LogCapture implements Logger {
  readonly lines: LogLine[] = [];
  private at(level: string) {
    return (msg: string) => {
      this.lines.push({ level, msg });
    };
  }
  critical = this.at("critical");
  error = this.at("error");
  warning = this.at("warning");
  info = this.at("info");
  debug = this.at("debug");
  trace = this.at("trace");

  warnings(): string[] {
    return this.lines.filter((l) => l.level === "warning").map((l) => l.msg);
  }
}

export interface NodeSpec {
  id: string;
  host?: string;
  port?: number;
  peers: PeerEndpoint[];
  /** ids whose keys this node knows (default: every id in `peers` and `knows`) */
  knows?: string[];
  identity?: PeerIdentity;
  cluster?: string;
  limits?: Partial<PeerLimits>;
  /** where the transport times its stages (seal, send, ...) */
  stages?: StageSink;
  /** the newer payload forms the node reads, by channel (PeerTransportOptions.channelVersions) */
  channelVersions?: Record<string, number>;
}

export interface TestNode {
  t: PeerTransport;
  log: LogCapture;
  host: string;
  port: number;
}

/** A started transport on a loopback address (the caller closes it). */
export async function startNode(spec: NodeSpec): Promise<TestNode> {
  const host = spec.host ?? "127.0.0.1";
  const port = spec.port ?? (await freePort(host));
  const log = new LogCapture();
  const known = spec.knows ?? spec.peers.map((p) => p.id).filter((x): x is string => x !== undefined);
  const t = new PeerTransport({
    clusterId: spec.cluster ?? CLUSTER,
    selfId: spec.id,
    listen: { host, port },
    peers: spec.peers,
    keys: { self: spec.identity ?? identity(spec.id), keyring: keyringOf(known) },
    limits: { ...FAST_LIMITS, ...spec.limits },
    log,
    ...(spec.stages ? { stages: spec.stages } : {}),
    ...(spec.channelVersions ? { channelVersions: spec.channelVersions } : {}),
  });
  await t.start();
  live.add(t);
  return { t, log, host, port };
}

/** Resolves with the arguments of the first `event` that satisfies `pred`; rejects after `ms`. */
export function nextEvent<A extends unknown[]>(em: EventEmitter, event: string, pred: (...a: A) => boolean = () => true, ms = 10_000): Promise<A> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      em.off(event, on);
      reject(new Error(`no ${event} within ${ms} ms`));
    }, ms);
    const on = (...a: unknown[]) => {
      if (!pred(...(a as A))) return;
      clearTimeout(timer);
      em.off(event, on);
      resolve(a as A);
    };
    em.on(event, on);
  });
}

/** Polls `cond` until it holds; rejects naming `what` after `ms`. */
export async function waitFor(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Waits until `t` has an established outbound session to every id in `ids`. */
export async function waitUp(t: PeerTransport, ids: string[], ms = 10_000): Promise<void> {
  await waitFor(() => ids.every((id) => t.isUp(id)), `sessions to ${ids.join(", ")}`, ms);
}

export const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
export const text = (b: Uint8Array): string => new TextDecoder().decode(b);
