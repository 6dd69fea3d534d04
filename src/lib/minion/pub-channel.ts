/**
 * The minion's publish channel (`salt/channel/client.py: AsyncPubChannel`, `salt/transport/zeromq.py:
 * PublishClient`).
 *
 * Socket: a SUB connected to the publish port learned from the auth reply, subscribed to everything,
 * IDENTITY = minion id, RECONNECT_IVL random in [recon_default, recon_default + recon_max] and
 * RECONNECT_IVL_MAX = recon_max, like a Salt minion. Messages are single frames (a 2-part
 * `[topic, payload]` message is read by its last part, as 3006 minions do).
 *
 * Decoding (`_decode_payload`): envelopes whose `enc` is not "aes" are ignored; with `sign_pub_messages`
 * the `sig` over the encrypted load must verify with `sig_algo`; the load is decrypted with the master AES
 * key. When the HMAC fails (the master has a new key) the minion waits a random time up to
 * `random_reauth_delay`, signs in again and decrypts the same message once more. A serial not newer than
 * the last one seen with this key is dropped.
 */
import * as zmq from "zeromq";
import type { KeyObject } from "node:crypto";
import { isBrineError } from "../../shared/errors.js";
import type { Crypticle } from "../../shared/protocol/crypticle.js";
import { asBytes, decodeWire, isMap, type WireValue } from "../../shared/protocol/msgpack.js";
import { isSigAlgo, rsaVerify, DEFAULT_SIG_ALGO } from "../../shared/protocol/rsa.js";
import { sharedTimer, type CoarseTimer } from "../../shared/coarse-timer.js";
import { defaultContext, tcpAddress, type Endpoint } from "../zmq-req-client.js";

export interface PubCrypto {
  /** the master AES key's Crypticle (holds the serial); undefined before sign-in */
  aesCrypticle(): Crypticle | undefined;
  masterPubKey(): KeyObject | undefined;
  reauth(reason: string): Promise<void>;
}

export type PubDrop = "malformed" | "not-aes" | "bad-sig" | "decrypt" | "stale-serial";

export type PubOutcome = { kind: "load"; load: Record<string, WireValue>; reauthed: boolean } | { kind: "drop"; reason: PubDrop; detail?: string };

export interface PubDecoderOptions {
  signPubMessages?: boolean;
  /** re-auth waits a random time in [0, this] ms (Salt's random_reauth_delay, 10 s by default) */
  randomReauthDelayMs?: number;
  timer?: CoarseTimer;
  random?: () => number;
  signal?: AbortSignal;
}

export class PubDecoder {
  constructor(
    private readonly crypto: PubCrypto,
    private readonly opts: PubDecoderOptions = {},
  ) {}

  async decode(frame: Buffer): Promise<PubOutcome> {
    let env: WireValue;
    try {
      env = decodeWire(frame);
    } catch (e) {
      return { kind: "drop", reason: "malformed", detail: (e as Error).message };
    }
    if (!isMap(env)) return { kind: "drop", reason: "malformed", detail: "not a map" };
    if (env.enc !== "aes") return { kind: "drop", reason: "not-aes" };
    const load = asBytes(env.load);
    if (!load) return { kind: "drop", reason: "malformed", detail: "load is not bytes" };
    if (this.opts.signPubMessages) {
      const sig = asBytes(env.sig);
      if (!sig) return { kind: "drop", reason: "bad-sig", detail: "Message signing is enabled but the payload has no signature." };
      const algo = env.sig_algo === undefined ? DEFAULT_SIG_ALGO : env.sig_algo;
      const key = this.crypto.masterPubKey();
      if (!isSigAlgo(algo) || !key || !rsaVerify(key, load, sig, algo)) {
        return { kind: "drop", reason: "bad-sig", detail: "Message signature failed to validate." };
      }
    }
    const first = this.open(load);
    if (first.kind === "load" || first.reason !== "decrypt") return first;
    // The master's AES key changed: wait a random time, sign in again, and try the same message again.
    const maxDelay = this.opts.randomReauthDelayMs ?? 10_000;
    if (maxDelay > 0) {
      const delay = Math.floor((this.opts.random ?? Math.random)() * (maxDelay + 1));
      await (this.opts.timer ?? sharedTimer).sleep(delay, this.opts.signal);
    }
    try {
      await this.crypto.reauth("publish did not decrypt");
    } catch (e) {
      return { kind: "drop", reason: "decrypt", detail: `re-auth failed: ${(e as Error).message}` };
    }
    const second = this.open(load);
    return second.kind === "load" ? { ...second, reauthed: true } : second;
  }

  private open(load: Buffer): PubOutcome {
    const c = this.crypto.aesCrypticle();
    if (!c) return { kind: "drop", reason: "decrypt", detail: "not signed in" };
    let v: WireValue;
    try {
      v = c.loads(load, { checkSerial: true });
    } catch (e) {
      if (isBrineError(e, "CRYPTICLE_AUTH") || isBrineError(e, "CRYPTICLE_FORMAT")) return { kind: "drop", reason: "decrypt", detail: (e as Error).message };
      return { kind: "drop", reason: "malformed", detail: (e as Error).message };
    }
    if (!isMap(v)) return { kind: "drop", reason: "malformed", detail: "publish load is not a map" };
    if (Object.keys(v).length === 0) return { kind: "drop", reason: "stale-serial" };
    return { kind: "load", load: v, reauthed: false };
  }
}

export interface PubSocketOptions {
  identity: string;
  context?: zmq.Context;
  /** recon_default (ms), 1000 in Salt */
  reconDefaultMs?: number;
  /** recon_max (ms), 10000 in Salt */
  reconMaxMs?: number;
  /** watch the connection (a libzmq monitor: two more sockets) to know when it is up and when it comes back */
  monitor?: boolean;
  random?: () => number;
  onFrame(frame: Buffer): void;
  onConnected?(first: boolean): void;
  onDisconnected?(): void;
}

/** The SUB socket and its receive loop. */
export class PubSocket {
  private sock: zmq.Subscriber | undefined;
  private handshakes = 0;
  private waiters: (() => void)[] = [];

  constructor(
    readonly endpoint: Endpoint,
    private readonly opts: PubSocketOptions,
  ) {}

  get connected(): boolean {
    return this.handshakes > 0;
  }

  /** Connect; with `monitor`, resolves at the first ZMTP handshake (or rejects after `timeoutMs`). */
  connect(timeoutMs: number, timer: CoarseTimer = sharedTimer): Promise<void> {
    const reconDefault = this.opts.reconDefaultMs ?? 1000;
    const reconMax = this.opts.reconMaxMs ?? 10_000;
    const rnd = this.opts.random ?? Math.random;
    const s = new zmq.Subscriber({
      context: this.opts.context ?? defaultContext(),
      linger: 0,
      reconnectInterval: reconDefault + Math.floor(rnd() * (reconMax + 1)),
      reconnectMaxInterval: reconMax,
    });
    try {
      (s as unknown as { setStringOption(o: number, v: string): void }).setStringOption(5, this.opts.identity); // ZMQ_IDENTITY
    } catch {
      // not fatal: only the greeting padding differs
    }
    s.subscribe();
    this.sock = s;
    let ready: Promise<void> = Promise.resolve();
    if (this.opts.monitor) {
      ready = new Promise<void>((resolve, reject) => {
        const h = timer.after(timeoutMs, () => reject(new Error(`no handshake on ${tcpAddress(this.endpoint)} within ${timeoutMs} ms`)));
        this.waiters.push(() => {
          h.cancel();
          resolve();
        });
      });
      s.events.on("handshake", () => {
        this.handshakes++;
        const w = this.waiters.splice(0);
        for (const f of w) f();
        this.opts.onConnected?.(this.handshakes === 1);
      });
      s.events.on("disconnect", () => this.opts.onDisconnected?.());
    } else {
      this.handshakes = 1;
    }
    s.connect(tcpAddress(this.endpoint));
    void this.loop(s);
    return ready;
  }

  private async loop(s: zmq.Subscriber): Promise<void> {
    try {
      for await (const frames of s) {
        const last = frames[frames.length - 1];
        if (last) this.opts.onFrame(last);
      }
    } catch {
      // closed
    }
  }

  close(): void {
    const s = this.sock;
    this.sock = undefined;
    this.waiters = [];
    if (s && !s.closed) s.close(); // never close the monitor itself: closing the socket ends it cleanly
  }
}
