/**
 * A low-level client for the master's request port, for bad-input tests: it sends whatever frames or loads
 * it is given (malformed msgpack, wrong envelopes, forged `tok`, replays, oversized frames) and returns
 * what comes back, without any of the checks a minion makes.
 *
 * It uses a DEALER socket, so it can send any frame sequence; `request()` adds the empty delimiter a REQ
 * socket would add and strips it from the reply. A request that gets no reply times out with
 * MINION_REQ_TIMEOUT; since a late reply could then be read as the next one's, call `drain()` after it.
 */
import * as zmq from "zeromq";
import { BrineError } from "../../shared/errors.js";
import { Crypticle } from "../../shared/protocol/crypticle.js";
import { decodeWire, type WireValue } from "../../shared/protocol/msgpack.js";
import type { MinionKeys } from "./keys.js";
import { envelopeVersion, newNonce, type Protocol } from "./sign-in.js";
import { defaultContext, tcpAddress, type Endpoint } from "../zmq-req-client.js";
import { packSalt, sealSalt } from "./wire.js";

export interface RawClientOptions extends Endpoint {
  /** default reply timeout (ms); 5000 */
  timeoutMs?: number;
  context?: zmq.Context;
  /** ZMQ routing id for the DEALER (default: none, like a REQ) */
  routingId?: string;
}

export interface RawAesOptions {
  /** key string to encrypt with: the session key (v3) or the master AES key (v2) */
  key: string;
  protocol?: Protocol;
  /** minion id for the v3 envelope (and the load, if it has none) */
  id?: string;
  /** adds `tok` (v3) from these keys; omit to send a load without it */
  keys?: MinionKeys;
  /** fix the nonce; `null` sends none */
  nonce?: string | null;
  /** fix `ts` (v3) */
  ts?: number;
  /** envelope fields to add or override (e.g. a different `id`, `enc_algo`) */
  envelope?: Record<string, unknown>;
  timeoutMs?: number;
}

export interface RawAesReply {
  /** the decoded reply as it came */
  reply: WireValue;
  /** the reply decrypted with the same key and nonce, when it was a ciphertext that opened */
  decrypted?: WireValue;
  /** why it did not open, when it did not */
  openError?: string;
  nonce: string | null;
}

export class RawClient {
  private readonly sock: zmq.Dealer;

  constructor(readonly opts: RawClientOptions) {
    this.sock = new zmq.Dealer({ context: opts.context ?? defaultContext(), linger: 0, ...(opts.routingId !== undefined ? { routingId: opts.routingId } : {}) });
    this.sock.connect(tcpAddress(opts));
  }

  /** Send these frames exactly (no delimiter added). */
  async sendOnly(frames: (Buffer | string)[]): Promise<void> {
    await this.sock.send(frames.map((f) => (typeof f === "string" ? Buffer.from(f) : f)));
  }

  /** Send frames exactly and wait for the next message (all its frames, delimiter included). */
  async sendFrames(frames: (Buffer | string)[], timeoutMs = this.opts.timeoutMs ?? 5_000): Promise<Buffer[]> {
    await this.sendOnly(frames);
    return this.receive(timeoutMs);
  }

  /** The next message, or MINION_REQ_TIMEOUT. */
  async receive(timeoutMs = this.opts.timeoutMs ?? 5_000): Promise<Buffer[]> {
    this.sock.receiveTimeout = timeoutMs;
    try {
      return await this.sock.receive();
    } catch (e) {
      throw new BrineError("MINION_REQ_TIMEOUT", `no reply within ${timeoutMs} ms (${(e as Error).message})`);
    }
  }

  /** Throw away replies that arrive within `ms` (after a timed-out request). */
  async drain(ms = 200): Promise<number> {
    let n = 0;
    for (;;) {
      try {
        await this.receive(ms);
        n++;
      } catch {
        return n;
      }
    }
  }

  /** REQ-style: `['', body]` → the reply body. A non-Buffer body is packed as a minion packs it. */
  async request(body: Buffer | unknown, timeoutMs?: number): Promise<Buffer> {
    const b = Buffer.isBuffer(body) ? body : packSalt(body);
    const frames = await this.sendFrames([Buffer.alloc(0), b], timeoutMs);
    return frames[frames.length - 1] ?? Buffer.alloc(0);
  }

  /** `request()` and decode the reply with the wire decoder. */
  async requestDecoded(body: Buffer | unknown, timeoutMs?: number): Promise<WireValue> {
    return decodeWire(await this.request(body, timeoutMs));
  }

  /** A clear request `{enc:"clear", load, version}`. */
  clear(load: unknown, version = 3, timeoutMs?: number): Promise<WireValue> {
    return this.requestDecoded({ enc: "clear", load, version }, timeoutMs);
  }

  /**
   * An AES request packaged like a minion's (v3: nonce, ts, tok, id inside; id, enc_algo, sig_algo outside;
   * v2: nonce inside), with every part overridable for hostile tests. The reply is opened when it can be.
   */
  async aes(load: Record<string, unknown>, o: RawAesOptions): Promise<RawAesReply> {
    const protocol = o.protocol ?? "v3";
    const c = new Crypticle(o.key);
    const nonce = o.nonce === undefined ? newNonce() : o.nonce;
    const inner: Record<string, unknown> = { ...load };
    if (nonce !== null) inner.nonce = nonce;
    if (protocol === "v3") {
      inner.ts = o.ts ?? Math.floor(Date.now() / 1000);
      if (o.keys) inner.tok = o.keys.tok;
      if (!("id" in inner) && o.id !== undefined) inner.id = o.id;
    }
    const envelope: Record<string, unknown> = { enc: "aes", load: sealSalt(c, inner), version: envelopeVersion(protocol) };
    if (protocol === "v3") {
      envelope.id = o.id ?? load.id;
      envelope.enc_algo = "OAEP-SHA1";
      envelope.sig_algo = "PKCS1v15-SHA1";
    }
    Object.assign(envelope, o.envelope);
    const reply = await this.requestDecoded(envelope, o.timeoutMs);
    const out: RawAesReply = { reply, nonce };
    const b = Buffer.isBuffer(reply) ? reply : undefined;
    if (b) {
      try {
        out.decrypted = nonce !== null ? c.loads(b, { nonce }) : c.loads(b);
      } catch (e) {
        out.openError = (e as Error).message;
      }
    } else {
      out.openError = "reply is not a ciphertext";
    }
    return out;
  }

  close(): void {
    if (!this.sock.closed) this.sock.close();
  }
}
