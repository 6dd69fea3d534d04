/**
 * The minion's request channel (`salt/channel/client.py: AsyncReqChannel`).
 *
 * Packaging (`_package_load`):
 * - v3: the load gains `nonce` (uuid4 hex), `ts` (epoch seconds), `tok` (X9.31 of "salt") and, when
 *   missing, `id`; it is encrypted with the per-minion **session** key; the envelope is
 *   `{enc:"aes", load, version:3, id, enc_algo, sig_algo}`;
 * - v2: the load gains `nonce` only and is encrypted with the master's **AES** key; the envelope is
 *   `{enc:"aes", load, version:2}`, plus `enc_algo`/`sig_algo` for 3006.9–3006.11 style minions.
 *
 * Replies (`_crypted_transfer`): an AES reply is one msgpack str, Crypticle(same key) of
 * `pickle::` ‖ nonce ‖ msgpack. A reply that does not decrypt — the bare `"bad load"`, `{"msg":"bad load"}`,
 * anything from a master that no longer knows our session or AES key — makes the minion sign in again and
 * send the same load once more: v3 (3007) with a fresh nonce, v2 (3006.8) with the same nonce, sealed again.
 *
 * Tries (`send`, Salt's AsyncReqChannel.send): a try that times out (or fails any other way) is packaged again:
 * a new nonce, new bytes, on a new socket (the transport drops the old one). That is every request but `_pillar`
 * in both 3006.8 and 3007.x, so a master never sees the same nonce twice from a minion's timeouts there.
 *
 * Private replies (`crypted_transfer_decode_dictentry`, `_pillar`): `{key, pillar}`; `key` is OAEP(minion
 * pub, one-time key string); `pillar` is Crypticle(one-time key) of `{data, sig}`; `sig` must verify over
 * `data` with the pinned master key; `data` decodes to `{key, pillar, nonce}` whose `key` must equal the
 * outer `key` and whose `nonce` must be ours. Here Salt packages once: a try that times out sends the very same
 * bytes again (the transport's tries), and a reply without `key` triggers one re-auth and a resend with the same
 * nonce, sealed again (docs/security.md, "A resend").
 */
import type { KeyObject } from "node:crypto";
import { BrineError, isBrineError } from "../../shared/errors.js";
import { Crypticle } from "../../shared/protocol/crypticle.js";
import { asBytes, decodeWire, isMap, type WireValue } from "../../shared/protocol/msgpack.js";
import { DEFAULT_SIG_ALGO, DEFAULT_ENC_ALGO, oaepDecrypt, rsaVerify, type EncAlgo, type SigAlgo } from "../../shared/protocol/rsa.js";
import type { MinionKeys } from "./keys.js";
import { envelopeVersion, newNonce, type Protocol } from "./sign-in.js";
import type { ReqTransport, RequestOptions } from "../zmq-req-client.js";
import { packSalt, sealSalt } from "./wire.js";

/** What the channel needs from its minion. */
export interface ChannelCrypto {
  readonly id: string;
  readonly protocol: Protocol;
  readonly keys: MinionKeys;
  readonly encAlgo: EncAlgo;
  readonly sigAlgo: SigAlgo;
  readonly sendAlgos: boolean;
  /** the key AES requests use now: the session key (v3) or the master AES key (v2); undefined before sign-in */
  requestCrypticle(): Crypticle | undefined;
  /** the pinned master key */
  masterPubKey(): KeyObject | undefined;
  /** sign in again (one at a time; concurrent callers share it); rejects when sign-in fails */
  reauth(reason: string): Promise<void>;
}

export interface PackagedRequest {
  body: Buffer;
  nonce: string;
  /** the load as encrypted (with nonce, ts, tok, id as the protocol wants) */
  inner: Record<string, unknown>;
  envelope: Record<string, unknown>;
}

function algosOf(c: ChannelCrypto): { enc: EncAlgo; sig: SigAlgo } {
  return c.protocol === "v3" || c.sendAlgos ? { enc: c.encAlgo, sig: c.sigAlgo } : { enc: DEFAULT_ENC_ALGO, sig: DEFAULT_SIG_ALGO };
}

/** Package an AES request. `nonce` and `ts` can be fixed (tests replaying a capture). */
export function packageAes(c: ChannelCrypto, load: Record<string, unknown>, opts: { nonce?: string; ts?: number } = {}): PackagedRequest {
  const crypticle = c.requestCrypticle();
  if (!crypticle) throw new BrineError("MINION_STOPPED", "not signed in");
  const nonce = opts.nonce ?? newNonce();
  const inner: Record<string, unknown> = { ...load, nonce };
  let envelope: Record<string, unknown>;
  if (c.protocol === "v3") {
    inner.ts = opts.ts ?? Math.floor(Date.now() / 1000);
    inner.tok = c.keys.tok;
    if (!("id" in inner)) inner.id = c.id;
    envelope = { enc: "aes", load: sealSalt(crypticle, inner), version: 3, id: c.id, enc_algo: c.encAlgo, sig_algo: c.sigAlgo };
  } else {
    envelope = { enc: "aes", load: sealSalt(crypticle, inner), version: 2 };
    if (c.sendAlgos) {
      envelope.enc_algo = c.encAlgo;
      envelope.sig_algo = c.sigAlgo;
    }
  }
  return { body: packSalt(envelope), nonce, inner, envelope };
}

/** A clear request (`_auth`, the CLI's `publish`): `{enc:"clear", load, version}`. */
export function packageClear(protocol: Protocol, load: Record<string, unknown>): Buffer {
  return packSalt({ enc: "clear", load, version: envelopeVersion(protocol) });
}

/** Is this decoded reply one of the master's "bad load" refusals? */
export function isBadLoadReply(v: WireValue): boolean {
  if (typeof v === "string") return v.startsWith("bad load") || v === "payload and load must be a dict" || v === "Some exception handling minion payload";
  return isMap(v) && typeof v.msg === "string" && v.msg.startsWith("bad load");
}

/** Decrypt an AES reply. Throws CRYPTICLE_AUTH/FORMAT (→ re-auth) or CRYPTICLE_NONCE. */
export function openAesReply(crypticle: Crypticle, reply: WireValue, nonce: string): WireValue {
  const b = Buffer.isBuffer(reply) ? reply : typeof reply === "string" ? Buffer.from(reply, "utf8") : undefined;
  if (!b) throw new BrineError("CRYPTICLE_FORMAT", "reply is not a ciphertext");
  return crypticle.loads(b, { nonce });
}

/** Open a private (signed) reply such as `_pillar`'s. Throws CRYPTICLE_AUTH when it must not be trusted. */
export function openPrivateReply(c: ChannelCrypto, reply: WireValue, nonce: string, dictKey = "pillar"): WireValue {
  if (!isMap(reply) || !("key" in reply)) throw new BrineError("CRYPTICLE_AUTH", "private reply has no key");
  const keyBlob = asBytes(reply.key);
  const body = asBytes(reply[dictKey]);
  if (!keyBlob || !body) throw new BrineError("CRYPTICLE_AUTH", "private reply is malformed");
  const { enc, sig: sigAlgo } = algosOf(c);
  const oneTime = oaepDecrypt(c.keys.privateKey, keyBlob, enc).toString("latin1");
  const signed = new Crypticle(oneTime).loads(body);
  if (!isMap(signed)) throw new BrineError("CRYPTICLE_AUTH", "private reply body is not a map");
  const data = asBytes(signed.data);
  const sig = asBytes(signed.sig);
  const master = c.masterPubKey();
  if (!data || !sig || !master || !rsaVerify(master, data, sig, sigAlgo)) {
    throw new BrineError("CRYPTICLE_AUTH", "Pillar payload signature failed to validate.");
  }
  const inner = decodeWire(data);
  if (!isMap(inner)) throw new BrineError("CRYPTICLE_AUTH", "signed data is not a map");
  const innerKey = asBytes(inner.key);
  if (!innerKey || !innerKey.equals(keyBlob)) throw new BrineError("CRYPTICLE_AUTH", "Key verification failed.");
  if (inner.nonce !== nonce) throw new BrineError("CRYPTICLE_AUTH", "Pillar nonce verification failed.");
  return inner[dictKey] ?? null;
}

export interface ChannelHooks {
  /** the master answered with a "bad load"-style refusal (before the re-auth and resend) */
  onBadLoad?(cmd: unknown, reply: WireValue): void;
  /** a reply did not decrypt and the channel signs in again */
  onReauth?(cmd: unknown): void;
}

function isAuthFailure(e: unknown): boolean {
  return isBrineError(e, "CRYPTICLE_AUTH") || isBrineError(e, "CRYPTICLE_FORMAT") || isBrineError(e, "RSA_DECRYPT") || isBrineError(e, "MSGPACK_INVALID") || isBrineError(e, "MSGPACK_TRUNCATED");
}

export class ReqChannel {
  private lock: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly transport: ReqTransport,
    private readonly crypto: ChannelCrypto,
    private readonly hooks: ChannelHooks = {},
  ) {}

  /** One request at a time per channel, packaged at its turn (so it uses the key in force then). */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn, fn);
    this.lock = run.catch(() => undefined);
    return run;
  }

  /**
   * One `_crypted_transfer` (or, `keepNonce`, one crypted_transfer_decode_dictentry): the load packaged and sent
   * (the transport's tries resend those bytes), and after a reply that does not open, one re-auth and a resend,
   * with the same nonce when `keepNonce`.
   */
  private async exchange(load: Record<string, unknown>, opts: RequestOptions, open: (reply: WireValue, nonce: string) => WireValue, keepNonce: boolean): Promise<WireValue> {
    let lastReply: WireValue = null;
    let nonce: string | undefined;
    for (let round = 0; round < 2; round++) {
      const pkg = packageAes(this.crypto, load, nonce === undefined ? {} : { nonce });
      if (keepNonce) nonce = pkg.nonce;
      const raw = await this.transport.request(pkg.body, { ...opts, label: opts.label ?? String(load.cmd) });
      let reply: WireValue;
      try {
        reply = raw.length === 0 ? null : decodeWire(raw);
      } catch {
        reply = { msg: "bad load" }; // undecodable reply: treat as a refusal
      }
      if (reply === null || (Buffer.isBuffer(reply) && reply.length === 0)) return null;
      lastReply = reply;
      try {
        return open(reply, pkg.nonce);
      } catch (e) {
        if (!isAuthFailure(e)) {
          throw new BrineError("MINION_BAD_REPLY", `${String(load.cmd)}: ${(e as Error).message}`);
        }
        if (isBadLoadReply(reply)) this.hooks.onBadLoad?.(load.cmd, reply);
        if (round === 1) break;
        this.hooks.onReauth?.(load.cmd);
        await this.crypto.reauth(`reply to ${String(load.cmd)} did not decrypt`);
      }
    }
    if (isBadLoadReply(lastReply)) throw new BrineError("MINION_BAD_LOAD", String(load.cmd));
    throw new BrineError("MINION_BAD_REPLY", `${String(load.cmd)}: reply did not decrypt after re-authentication`);
  }

  /**
   * An AES request; resolves to the decrypted reply. Each of `opts.tries` is packaged anew (a new nonce and new
   * bytes, as Salt's send() calls _crypted_transfer per try); any failure but the minion stopping is tried again.
   */
  send(load: Record<string, unknown>, opts: RequestOptions): Promise<WireValue> {
    const open = (reply: WireValue, nonce: string) => {
      const c = this.crypto.requestCrypticle();
      if (!c) throw new BrineError("CRYPTICLE_AUTH", "no key");
      return openAesReply(c, reply, nonce);
    };
    return this.serial(async () => {
      const tries = Math.max(1, opts.tries);
      for (let attempt = 1; ; attempt++) {
        try {
          return await this.exchange(load, { ...opts, tries: 1, attemptOf: { attempt, tries } }, open, this.crypto.protocol === "v2");
        } catch (e) {
          if (attempt >= tries || isBrineError(e, "MINION_STOPPED")) throw e;
        }
      }
    });
  }

  /**
   * An AES request answered with a private signed reply (`_pillar`); resolves to `dictKey`'s value. Packaged once:
   * the transport's tries send the same bytes again, the re-auth resend keeps the nonce (Salt 3006.8 and 3007.x).
   */
  sendPrivate(load: Record<string, unknown>, opts: RequestOptions, dictKey = "pillar"): Promise<WireValue> {
    return this.serial(() => this.exchange(load, opts, (reply, nonce) => openPrivateReply(this.crypto, reply, nonce, dictKey), true));
  }

  /** A clear request; resolves to the decoded reply as is. */
  sendClear(load: Record<string, unknown>, opts: RequestOptions): Promise<WireValue> {
    return this.serial(async () => decodeWire(await this.transport.request(packageClear(this.crypto.protocol, load), { ...opts, label: opts.label ?? String(load.cmd) })));
  }
}
