/**
 * The peer channel handshake, sans-I/O: each side is a small state machine that takes frames and returns
 * the frame to send, and at the end a Session. Four messages, the initiator being the side that dialled:
 *
 *   1. HELLO    I → R  clear   {v, cluster, from: I, to: R | null, eph: e_I, nonce: n_I[, ch]}
 *   2. WELCOME  R → I  clear   {v, cluster, from: R, to: I,        eph: e_R, nonce: n_R[, ch]}
 *   3. AUTH     I → R  sealed with k_i2r, seq 0: {sig: Sign_I(L ‖ "initiator" ‖ th)}
 *   4. CONFIRM  R → I  sealed with k_r2i, seq 0: {sig: Sign_R(L ‖ "responder" ‖ th)}
 *
 *   th    = BLAKE2b-256(L ‖ len ‖ HELLO bytes ‖ len ‖ WELCOME bytes)   (the frames exactly as sent)
 *   s     = X25519(e_I, e_R)                                            (ephemeral: forward secrecy)
 *   k_i2r = BLAKE2b-256(key = s, L ‖ "i2r" ‖ th), k_r2i likewise         (derived once per connection)
 *
 * Why this is enough (invariants):
 * - mutual authentication by proof of possession: each side signs a transcript that contains the other
 *   side's fresh ephemeral key and nonce, with the key in `peers/<id>.pub` of the id it claims. Nothing is
 *   trusted on first use: an id without a key file is refused before any crypto;
 * - the signatures are inside frames sealed with the derived keys, so each side also proves it holds the
 *   ephemeral secret (key confirmation): a relayed or spliced handshake fails at the AEAD tag;
 * - identities, cluster id and version are in th, and the two signatures carry different role labels, so a
 *   signature cannot be reflected, replayed into another handshake, or moved to another cluster;
 * - the responder does the expensive step (an RSA signature) only after it verified the initiator's
 *   signature (a cheap RSA verify), so unauthenticated HELLOs cost it one X25519 key pair and one scalar
 *   multiplication.
 *
 * `ch` (optional, since session 18): the newer payload forms the sender reads, by channel (`{raft: 2}`); the
 * session keeps the peer's (Session.peerReads), and a sender uses a newer form only with a peer that named it,
 * so masters of two builds talk during a rolling upgrade. A master before it ignores the field (it reads the
 * fields it knows); it is in th like every byte of the frame, so it is authenticated with the rest.
 *
 * A refusal is a HandshakeError: code CLUSTER_PEER_REFUSED for identity failures (unknown or forged peer,
 * duplicate id, wrong node or cluster), CLUSTER_HANDSHAKE for protocol failures; `reason` is the short code
 * the transport logs and sends back in a REFUSE frame.
 */
import type { KeyObject } from "node:crypto";
import { BrineError } from "../../../shared/errors.js";
import { validateNodeId } from "../../../shared/cluster-names.js";
import { FRAME, PROTOCOL_VERSION, concatBytes, decodeHello, decodeProof, encodeClear, encodeProof, type HelloFields } from "./framing.js";
import { signWith, verifyWith, type PeerIdentity, type PeerKeyring } from "../../../shared/cluster-keys.js";
import type { PeerLimits } from "./limits.js";
import { Session } from "./session.js";
import { sodium } from "./sodium.js";

const LABEL = "brine peer channel v1";
const enc = new TextEncoder();
const LABEL_BYTES = enc.encode(LABEL);
const I2R = enc.encode(`${LABEL} i2r`);
const R2I = enc.encode(`${LABEL} r2i`);
const SIGN_INITIATOR = enc.encode(`${LABEL} initiator`);
const SIGN_RESPONDER = enc.encode(`${LABEL} responder`);

export type RefuseReason =
  | "version" // another protocol version
  | "cluster" // another cluster_id
  | "bad-id" // the claimed id is not a valid node id
  | "unknown-peer" // no peers/<id>.pub for the claimed id
  | "duplicate-id" // the peer claims this master's own id
  | "wrong-node" // the peer expected another node id than ours (or answered with another than expected)
  | "forged" // signature or key confirmation failed: not the holder of the id's key
  | "bad-key" // the ephemeral key is a low-order point
  | "bad-frame" // malformed handshake frame
  | "state"; // a frame out of order

const IDENTITY_REASONS: ReadonlySet<string> = new Set<RefuseReason>(["cluster", "bad-id", "unknown-peer", "duplicate-id", "wrong-node", "forged"]);

/** True for refusals about who a peer is (they do not fix themselves by redialling soon). */
export function isIdentityRefusal(reason: string): boolean {
  return IDENTITY_REASONS.has(reason);
}

export class HandshakeError extends BrineError {
  constructor(
    readonly reason: RefuseReason,
    /** the id the other side claimed, when it got that far (for the log; not authenticated) */
    readonly claimedId: string | undefined,
    detail: string,
  ) {
    super(isIdentityRefusal(reason) ? "CLUSTER_PEER_REFUSED" : "CLUSTER_HANDSHAKE", `${reason}: ${detail}`);
  }
}

export interface HandshakeContext {
  clusterId: string;
  self: PeerIdentity;
  keyring: PeerKeyring;
  limits: Pick<PeerLimits, "handshakeFrameBytesMax" | "sessionMessagesMax">;
  /** the newer payload forms this master reads, by channel, told to every peer in HELLO/WELCOME (`ch`) */
  channelVersions?: Readonly<Record<string, number>>;
}

/** HELLO/WELCOME's `ch`, only when there is something to say: with nothing, the frames are those of masters before it. */
function chField(ctx: HandshakeContext): { ch?: Readonly<Record<string, number>> } {
  return ctx.channelVersions && Object.keys(ctx.channelVersions).length > 0 ? { ch: ctx.channelVersions } : {};
}

const concat = (...parts: Uint8Array[]): Uint8Array => concatBytes(parts);

function u32(n: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n);
  return b;
}

function transcriptHash(hello: Uint8Array, welcome: Uint8Array): Uint8Array {
  return sodium.crypto_generichash(32, concat(LABEL_BYTES, u32(hello.length), hello, u32(welcome.length), welcome));
}

interface Derived {
  th: Uint8Array;
  i2r: Uint8Array;
  r2i: Uint8Array;
  sessionId: string;
}

/** X25519 and the key schedule; wipes the shared secret. A low-order peer key is refused. */
function derive(ephSecret: Uint8Array, peerEph: Uint8Array, hello: Uint8Array, welcome: Uint8Array, claimedId: string): Derived {
  let shared: Uint8Array;
  try {
    shared = sodium.crypto_scalarmult(ephSecret, peerEph);
  } catch {
    // libsodium refuses an all-zero result, which only a low-order point produces
    throw new HandshakeError("bad-key", claimedId, "ephemeral key is a low-order point");
  }
  if (sodium.is_zero(shared)) throw new HandshakeError("bad-key", claimedId, "ephemeral key is a low-order point");
  const th = transcriptHash(hello, welcome);
  const i2r = sodium.crypto_generichash(32, concat(I2R, th), shared);
  const r2i = sodium.crypto_generichash(32, concat(R2I, th), shared);
  sodium.memzero(shared);
  const sessionId = sodium.to_hex(sodium.crypto_generichash(8, th));
  return { th, i2r, r2i, sessionId };
}

function newEphemeral(): { publicKey: Uint8Array; privateKey: Uint8Array } {
  return sodium.crypto_kx_keypair();
}

/** Checks the fields both HELLO and WELCOME share; returns the claimed id and its key. */
function checkPeerFields(ctx: HandshakeContext, f: HelloFields): KeyObject {
  if (f.v !== PROTOCOL_VERSION) throw new HandshakeError("version", f.from, `peer speaks version ${f.v}, this master ${PROTOCOL_VERSION}`);
  if (f.cluster !== ctx.clusterId) throw new HandshakeError("cluster", f.from, `peer is in cluster ${JSON.stringify(f.cluster)}, not ${JSON.stringify(ctx.clusterId)}`);
  try {
    validateNodeId(f.from, "peer id");
  } catch (e) {
    throw new HandshakeError("bad-id", undefined, (e as Error).message);
  }
  if (f.from === ctx.self.id) {
    throw new HandshakeError("duplicate-id", f.from, `peer claims this master's own node id ${JSON.stringify(f.from)}: two masters share an \`id\`, or cluster_peers lists this master`);
  }
  const key = ctx.keyring.get(f.from);
  if (!key) throw new HandshakeError("unknown-peer", f.from, `no key for ${JSON.stringify(f.from)} in cluster_pki_dir/peers`);
  return key;
}

function decodeOrRefuse(frame: Uint8Array, type: number, ctx: HandshakeContext): HelloFields {
  if (frame[0] !== type) throw new HandshakeError("state", undefined, `expected frame type ${type}, got ${frame[0]}`);
  try {
    return decodeHello(frame, ctx.limits.handshakeFrameBytesMax);
  } catch (e) {
    throw new HandshakeError("bad-frame", undefined, (e as Error).message);
  }
}

function openProof(session: Session, frame: Uint8Array, type: number, claimedId: string): Uint8Array {
  if (frame[0] !== type) throw new HandshakeError("state", claimedId, `expected frame type ${type}, got ${frame[0]}`);
  let plain: Uint8Array;
  try {
    plain = session.open(frame).plaintext;
  } catch {
    throw new HandshakeError("forged", claimedId, "key confirmation failed (the peer does not hold the ephemeral secret of this handshake)");
  }
  try {
    return decodeProof(plain);
  } catch (e) {
    throw new HandshakeError("bad-frame", claimedId, (e as Error).message);
  }
}

type Stage = "started" | "sent-auth" | "awaiting-auth" | "done" | "failed";

/** What both sides keep between frames, and their shared failure rule: any error aborts and wipes. */
abstract class HandshakeSide {
  protected readonly eph = newEphemeral();
  protected stage: Stage = "started";
  protected session: Session | undefined;
  protected th: Uint8Array | undefined;
  protected peerKey: KeyObject | undefined;
  protected peer: string | undefined;

  constructor(protected readonly ctx: HandshakeContext) {}

  /** the other side's node id once its first frame was accepted (authenticated only when the handshake is done) */
  get peerId(): string | undefined {
    return this.peer;
  }

  /** Abandon the handshake (timeout, socket closed, refusal): wipes its secrets. */
  abort(): void {
    if (this.stage === "done") return;
    this.stage = "failed";
    sodium.memzero(this.eph.privateKey);
    this.session?.destroy();
  }

  protected established(d: Derived, peer: string, key: KeyObject, role: "initiator" | "responder", peerChannels: Readonly<Record<string, number>> = {}): Session {
    sodium.memzero(this.eph.privateKey);
    const [send, recv] = role === "initiator" ? [d.i2r, d.r2i] : [d.r2i, d.i2r];
    this.session = new Session(peer, d.sessionId, role, send, recv, this.ctx.limits.sessionMessagesMax, peerChannels);
    this.th = d.th;
    this.peerKey = key;
    this.peer = peer;
    return this.session;
  }

  /** Opens the peer's proof frame and checks its signature over the transcript with the peer's key. */
  protected checkProof(frame: Uint8Array, type: number, label: Uint8Array, who: string): void {
    const sig = openProof(this.session!, frame, type, this.peer!);
    if (!verifyWith(this.peerKey!, concat(label, this.th!), sig)) {
      throw new HandshakeError("forged", this.peer, `${who}'s signature does not verify with the key of ${JSON.stringify(this.peer)}`);
    }
  }

  protected proof(label: Uint8Array, type: typeof FRAME.AUTH | typeof FRAME.CONFIRM): Uint8Array {
    return this.session!.seal(type, encodeProof(signWith(this.ctx.self.privateKey, concat(label, this.th!))));
  }

  protected guard<T>(want: Stage, step: () => T): T {
    if (this.stage !== want) throw new HandshakeError("state", this.peer, `frame arrived in stage ${this.stage}`);
    try {
      return step();
    } catch (e) {
      this.abort();
      throw e instanceof HandshakeError ? e : new HandshakeError("bad-frame", this.peer, (e as Error).message);
    }
  }
}

/** The dialling side. */
export class InitiatorHandshake extends HandshakeSide {
  readonly hello: Uint8Array;

  /** `expectedPeer`: the node id this address belongs to, when configured; null to learn it from WELCOME. */
  constructor(
    ctx: HandshakeContext,
    readonly expectedPeer: string | null,
  ) {
    super(ctx);
    this.hello = encodeClear(FRAME.HELLO, {
      v: PROTOCOL_VERSION,
      cluster: ctx.clusterId,
      from: ctx.self.id,
      to: expectedPeer,
      eph: this.eph.publicKey,
      nonce: sodium.randombytes_buf(32),
      ...chField(ctx),
    });
  }

  /** WELCOME → AUTH. */
  onWelcome(frame: Uint8Array): Uint8Array {
    return this.guard("started", () => {
      const w = decodeOrRefuse(frame, FRAME.WELCOME, this.ctx);
      if (this.expectedPeer !== null && w.from !== this.expectedPeer) {
        throw new HandshakeError("wrong-node", w.from, `dialled ${JSON.stringify(this.expectedPeer)} but ${JSON.stringify(w.from)} answered`);
      }
      const key = checkPeerFields(this.ctx, w);
      if (w.to !== this.ctx.self.id) throw new HandshakeError("wrong-node", w.from, `WELCOME addressed to ${JSON.stringify(w.to)}`);
      this.established(derive(this.eph.privateKey, w.eph, this.hello, frame, w.from), w.from, key, "initiator", w.ch);
      this.stage = "sent-auth";
      return this.proof(SIGN_INITIATOR, FRAME.AUTH);
    });
  }

  /** CONFIRM → the established session. */
  onConfirm(frame: Uint8Array): Session {
    return this.guard("sent-auth", () => {
      this.checkProof(frame, FRAME.CONFIRM, SIGN_RESPONDER, "responder");
      this.stage = "done";
      return this.session!;
    });
  }
}

/** The listening side: one instance per connection that sent a HELLO. */
export class ResponderHandshake extends HandshakeSide {
  /** HELLO → WELCOME. */
  onHello(frame: Uint8Array): Uint8Array {
    return this.guard("started", () => {
      const h = decodeOrRefuse(frame, FRAME.HELLO, this.ctx);
      const key = checkPeerFields(this.ctx, h);
      if (h.to !== null && h.to !== this.ctx.self.id) {
        throw new HandshakeError("wrong-node", h.from, `HELLO for ${JSON.stringify(h.to)} reached ${JSON.stringify(this.ctx.self.id)}`);
      }
      const welcome = encodeClear(FRAME.WELCOME, {
        v: PROTOCOL_VERSION,
        cluster: this.ctx.clusterId,
        from: this.ctx.self.id,
        to: h.from,
        eph: this.eph.publicKey,
        nonce: sodium.randombytes_buf(32),
        ...chField(this.ctx),
      });
      this.established(derive(this.eph.privateKey, h.eph, frame, welcome, h.from), h.from, key, "responder", h.ch);
      this.stage = "awaiting-auth";
      return welcome;
    });
  }

  /** AUTH → CONFIRM and the established session. The RSA signature is made only after the peer's verified. */
  onAuth(frame: Uint8Array): { confirm: Uint8Array; session: Session } {
    return this.guard("awaiting-auth", () => {
      this.checkProof(frame, FRAME.AUTH, SIGN_INITIATOR, "initiator");
      const confirm = this.proof(SIGN_RESPONDER, FRAME.CONFIRM);
      this.stage = "done";
      return { confirm, session: this.session! };
    });
  }
}
