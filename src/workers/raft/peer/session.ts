/**
 * One authenticated session over one connection: two XChaCha20-Poly1305 keys (one per direction, derived
 * once by the handshake) and two counters. Sans-I/O: seal() turns plaintext into a frame, open() a frame
 * into plaintext, nothing else.
 *
 * Nonce and replay rule (invariants):
 * - the sender numbers its frames 0, 1, 2, … (0 is the handshake's AUTH or CONFIRM); the number is the last
 *   8 bytes of the 24-byte nonce and sits in the frame header, which is the associated data. A (key, nonce)
 *   pair is therefore never used twice: the key is unique to this session and direction, the number only
 *   grows, and a session that reaches `messagesMax` refuses to seal (the transport reconnects, which makes
 *   new keys);
 * - the receiver accepts a frame only if its number is greater than the last accepted one. Replays
 *   (equal) and reordering (smaller) are refused before any decryption; gaps are allowed, because a frame
 *   the sender sealed can still be lost between the two sockets (a dropped reply), and a frame is never
 *   sealed twice;
 * - the last accepted number advances only after the tag verified, so a forged frame with a huge number
 *   cannot block the session.
 */
import { BrineError } from "../../../shared/errors.js";
import { AEAD_TAG_BYTES, FRAME, SEALED_HEADER_BYTES, frameError, readSealedSeq, writeSealedHeader, type FrameType } from "./framing.js";
import { sodium } from "./sodium.js";

const NONCE_BYTES = 24;

export type SessionRole = "initiator" | "responder";

export interface Opened {
  type: FrameType;
  seq: number;
  plaintext: Uint8Array;
}

export class Session {
  /** the number the next sealed frame gets */
  private nextSendSeq = 0;
  /** the last number accepted from the peer; -1 before the first */
  private lastRecvSeq = -1;
  private readonly sendNonce = new Uint8Array(NONCE_BYTES);
  private readonly recvNonce = new Uint8Array(NONCE_BYTES);
  private destroyed = false;

  constructor(
    /** the authenticated node id of the other side */
    readonly peerId: string,
    /** a short, non-secret id of this session for logs (hash of the transcript) */
    readonly id: string,
    readonly role: SessionRole,
    private readonly sendKey: Uint8Array,
    private readonly recvKey: Uint8Array,
    /** frames sealed per direction before the session must be replaced, count */
    private readonly messagesMax: number,
    /** the newer payload forms the peer said in its handshake it reads, by channel (HELLO/WELCOME `ch`) */
    private readonly peerChannels: Readonly<Record<string, number>> = {},
  ) {}

  /** The newest form of `channel`'s payloads the peer reads: what its handshake said, 1 when it said nothing. */
  peerReads(channel: string): number {
    return Object.hasOwn(this.peerChannels, channel) ? this.peerChannels[channel]! : 1;
  }

  /** frames sealed so far (the handshake's included) */
  get sealed(): number {
    return this.nextSendSeq;
  }

  /** true when no further frame can be sealed: the owner must open a new session */
  get exhausted(): boolean {
    return this.nextSendSeq >= this.messagesMax;
  }

  seal(type: FrameType, plaintext: Uint8Array): Uint8Array {
    if (this.destroyed) throw new BrineError("CLUSTER_PEER_CLOSED", `session ${this.id} is closed`);
    if (this.exhausted) throw new BrineError("CLUSTER_PEER_DOWN", `session ${this.id} sealed ${this.messagesMax} frames; a new handshake is needed`);
    const seq = this.nextSendSeq++;
    const out = new Uint8Array(SEALED_HEADER_BYTES + plaintext.length + AEAD_TAG_BYTES);
    writeSealedHeader(out, type, seq);
    const header = out.subarray(0, SEALED_HEADER_BYTES);
    setCounter(this.sendNonce, seq);
    const ct = sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, header, null, this.sendNonce, this.sendKey);
    out.set(ct, SEALED_HEADER_BYTES);
    return out;
  }

  open(frame: Uint8Array): Opened {
    if (this.destroyed) throw new BrineError("CLUSTER_PEER_CLOSED", `session ${this.id} is closed`);
    const type = frame[0] as FrameType;
    if (type !== FRAME.DATA && type !== FRAME.AUTH && type !== FRAME.CONFIRM) throw frameError(`frame type ${type} is not sealed`);
    const seq = readSealedSeq(frame);
    if (seq <= this.lastRecvSeq) {
      throw new BrineError("CLUSTER_PEER_REPLAY", `frame ${seq} from ${this.peerId} after ${this.lastRecvSeq} (session ${this.id})`);
    }
    setCounter(this.recvNonce, seq);
    let plaintext: Uint8Array;
    try {
      plaintext = sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(
        null,
        frame.subarray(SEALED_HEADER_BYTES),
        frame.subarray(0, SEALED_HEADER_BYTES),
        this.recvNonce,
        this.recvKey,
      );
    } catch {
      throw new BrineError("CLUSTER_PEER_AUTH", `frame ${seq} claimed to be from ${this.peerId} (session ${this.id})`);
    }
    this.lastRecvSeq = seq;
    return { type, seq, plaintext };
  }

  /** Wipes both keys; every later seal/open throws CLUSTER_PEER_CLOSED. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    sodium.memzero(this.sendKey);
    sodium.memzero(this.recvKey);
  }
}

/** Writes `seq` big-endian into the last 8 bytes of a 24-byte nonce (the first 16 stay zero). */
function setCounter(nonce: Uint8Array, seq: number): void {
  const hi = Math.floor(seq / 0x1_0000_0000);
  const lo = seq >>> 0;
  nonce[16] = hi >>> 24;
  nonce[17] = (hi >>> 16) & 0xff;
  nonce[18] = (hi >>> 8) & 0xff;
  nonce[19] = hi & 0xff;
  nonce[20] = lo >>> 24;
  nonce[21] = (lo >>> 16) & 0xff;
  nonce[22] = (lo >>> 8) & 0xff;
  nonce[23] = lo & 0xff;
}
