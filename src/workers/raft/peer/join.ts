/**
 * The join of a master into a running cluster when masters do not share `cluster_pki_dir`
 * (`cluster_isolated_filesystem`), sans-I/O: the joiner and the responder are small state machines that take
 * frames and return frames; the clock and the randomness are injected. The peer channel's handshake
 * (handshake.ts) refuses any id without a key, so this exchange is what gives a new master its key on every
 * member, and every member's key to it. Four messages, each a JOIN frame (type byte + CBOR):
 *
 *   1. DISCOVER  J → R  clear   {m: {v, cluster, from: J, pub: J's master.pub, eph: e_J, nonce: n_J, ts}, sig: Sign_J(L_d ‖ m)}
 *   2. CHALLENGE R → J  clear   {m: {v, cluster, from: R, pub: R's master.pub, cluster_pub, eph: e_R, nonce: n_R},
 *                                sig: Sign_R(L_r ‖ th), csig: Sign_C(L_c ‖ th)}
 *   3. PROOF     J → R  sealed with k_j2r: {mac: MAC_S("joiner" ‖ th), sig: Sign_J(L_j ‖ th)}
 *   4. ADMIT     R → J  sealed with k_r2j: {mac: MAC_S("responder" ‖ th), cluster_pem, aes, secret, members: {id: pem}}
 *   (either side may answer REFUSE {reason, detail} instead, clear)
 *
 *   th    = BLAKE2b-256(L ‖ len ‖ DISCOVER.m ‖ len ‖ CHALLENGE.m)        (the bytes exactly as sent)
 *   s     = X25519(e_J, e_R);  k_j2r = BLAKE2b-256(key = s, L ‖ "j2r" ‖ th), k_r2j likewise (one message each)
 *   MAC_S = BLAKE2b-256(key = BLAKE2b-256(L ‖ cluster_secret), label ‖ th)
 *
 * Invariants (what an attacker cannot do):
 * - learn the secret: it never travels before the joiner has checked the cluster key; the joiner's MAC is
 *   keyed by it, bound to both fresh ephemeral keys, and sealed with a key only the two ends hold, so even a
 *   low-entropy secret gives an eavesdropper nothing to guess against offline;
 * - join without the secret: the responder admits only after the MAC verifies (constant-time compare);
 * - pose as the cluster: the joiner trusts a responder only after `cluster_pub` matches its pin (the
 *   `cluster_pub_fingerprint`, or `cluster.pub` in a shared `cluster_pki_dir`) and `csig` verifies with it, so
 *   only a holder of cluster.pem can answer; no pin, no join (no trust on first use);
 * - pose as another joiner or splice two exchanges: DISCOVER is signed by the joiner's key and PROOF signs
 *   the transcript, which holds both ephemeral keys and nonces; the sealed frames fail at the tag otherwise;
 * - replay: a DISCOVER whose (from, nonce) was seen within the window, or whose `ts` is outside it, is refused;
 *   a replayed PROOF cannot match a new CHALLENGE's ephemeral key;
 * - take over a node id: a DISCOVER naming a node id this cluster knows with another key is refused.
 * What travels in ADMIT (cluster.pem, the publish AES key, the secret, every member's master.pub) is sealed
 * with k_r2j, derived from the joiner's ephemeral key, which the joiner signed with its master key: only the
 * holder of the joiner's private key (of this exchange) can open it, and nothing old opens it (forward secrecy).
 *
 * The responder decides nothing on its own about persistence: after PROOF it returns `admit` (id and key) to
 * its shell, which records the key cluster-wide, then asks for the ADMIT frame (`admitted`).
 */
import { createPrivateKey, createPublicKey, timingSafeEqual, type KeyObject } from "node:crypto";
import { fingerprintMatches } from "../../../shared/cluster-fingerprint.js";
import { cbor as codec } from "../../../shared/cbor.js";
import { BrineError } from "../../../shared/errors.js";
import { validateNodeId } from "../../../shared/cluster-names.js";
import { isKeyFileId, parsePeerPublicKey, signWith, verifyWith } from "../../../shared/cluster-keys.js";
import { pemFinger } from "../../../shared/protocol/pem.js";
import { concatBytes } from "./framing.js";
import { sodium } from "./sodium.js";

/** the frame type byte of every join frame (after the handshake's 0x01-0x06) */
export const JOIN_FRAME = 0x07;
export const JOIN_VERSION = 1;
/** a join frame, bytes (ADMIT carries cluster.pem and up to joinMembersMax public keys) */
export const joinFrameBytesMax = 128 * 1024;
/** members listed in ADMIT, count */
export const joinMembersMax = 64;
/** a DISCOVER whose ts is further than this from the responder's clock is refused, ms */
export const joinReplayWindowMs = 5 * 60_000;
/** DISCOVER nonces remembered for replay refusal (oldest forgotten first; they expire with the window), count */
export const joinNoncesRememberedMax = 4096;
/** bytes of a PEM text in a join frame */
const pemBytesMax = 8192;
/** bytes of the publish AES key text and of the secret in ADMIT */
const textBytesMax = 4096;

const LABEL = "brine cluster join v1";
const enc = new TextEncoder();
const L = enc.encode(LABEL);
const L_DISCOVER = enc.encode(`${LABEL} discover`);
const L_RESPONDER = enc.encode(`${LABEL} responder`);
const L_CLUSTER = enc.encode(`${LABEL} cluster key`);
const L_JOINER = enc.encode(`${LABEL} joiner`);
const L_J2R = enc.encode(`${LABEL} j2r`);
const L_R2J = enc.encode(`${LABEL} r2j`);
const MAC_JOINER = enc.encode(`${LABEL} mac joiner`);
const MAC_RESPONDER = enc.encode(`${LABEL} mac responder`);
const ZERO_NONCE = new Uint8Array(24);

/**
 * Why a join was refused, as the log and the REFUSE frame name it:
 * secret (wrong cluster_secret), fingerprint (the cluster key does not match the joiner's pin), another-cluster
 * (the responder proves a cluster key of the same cluster_id other than the one this master's own cluster holds:
 * two clusters were founded with one id), cluster (another cluster_id), known-id (a node id this cluster knows with another key), replay (a DISCOVER seen before or out of
 * the window), forged (a signature or a seal that does not verify), duplicate-id (the joiner claims the
 * responder's id), no-cluster (the responder has no cluster to join yet), bad-frame, version, state.
 */
export type JoinRefusal = "secret" | "fingerprint" | "another-cluster" | "cluster" | "known-id" | "removed" | "replay" | "forged" | "duplicate-id" | "no-cluster" | "bad-frame" | "version" | "state" | "busy";

const REFUSALS: ReadonlySet<string> = new Set<JoinRefusal>(["secret", "fingerprint", "another-cluster", "cluster", "known-id", "removed", "replay", "forged", "duplicate-id", "no-cluster", "bad-frame", "version", "state", "busy"]);

export class JoinError extends BrineError {
  constructor(
    readonly reason: JoinRefusal,
    /** the reason in words, without the code's prefix (what a REFUSE frame carries) */
    readonly detail: string,
    /** true when the other side said so (a REFUSE frame), false when this side found it */
    readonly remote = false,
  ) {
    super(reason === "bad-frame" ? "CLUSTER_JOIN_FRAME" : "CLUSTER_JOIN_REFUSED", `${reason}: ${detail}`);
  }
}

// ------------------------------------------------------------------ frames

type Fields = Record<string, unknown>;

function frame(fields: Fields): Uint8Array {
  const body = codec.encode(fields) as Uint8Array;
  const out = new Uint8Array(1 + body.length);
  out[0] = JOIN_FRAME;
  out.set(body, 1);
  if (out.length > joinFrameBytesMax) throw new JoinError("bad-frame", `join frame of ${out.length} bytes exceeds ${joinFrameBytesMax}`);
  return out;
}

function bad(detail: string): JoinError {
  return new JoinError("bad-frame", detail);
}

function decodeMap(bytes: Uint8Array, what: string): Fields {
  let v: unknown;
  try {
    v = codec.decode(bytes);
  } catch (e) {
    throw bad(`${what} is not CBOR (${(e as Error).message})`);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v) || v instanceof Uint8Array) throw bad(`${what} is not a map`);
  return v as Fields;
}

function own(m: Fields, k: string): unknown {
  return Object.hasOwn(m, k) ? m[k] : undefined;
}

function bytesField(m: Fields, k: string, len?: number, max = joinFrameBytesMax): Uint8Array {
  const v = own(m, k);
  if (!(v instanceof Uint8Array) || (len !== undefined && v.length !== len) || v.length > max) throw bad(`${k} must be ${len ?? `at most ${max}`} bytes`);
  return v;
}

function textField(m: Fields, k: string, max: number, allowEmpty = false): string {
  const v = own(m, k);
  if (typeof v !== "string" || (!allowEmpty && v.length === 0) || enc.encode(v).length > max) throw bad(`${k} must be a string of at most ${max} bytes`);
  return v;
}

/** A JOIN frame's outer map, with `t` (the message name). REFUSE frames become a JoinError (remote). */
export function decodeJoinFrame(f: Uint8Array): { t: string; m: Fields } {
  if (!(f instanceof Uint8Array) || f.length < 2 || f[0] !== JOIN_FRAME) throw bad("not a join frame");
  if (f.length > joinFrameBytesMax) throw bad(`join frame of ${f.length} bytes exceeds ${joinFrameBytesMax}`);
  const m = decodeMap(f.subarray(1), "join frame");
  const t = own(m, "t");
  if (typeof t !== "string") throw bad("join frame has no message name");
  if (t === "refuse") {
    const reason = own(m, "reason");
    const detail = own(m, "detail");
    const r = typeof reason === "string" && REFUSALS.has(reason) ? (reason as JoinRefusal) : "bad-frame";
    throw new JoinError(r, typeof detail === "string" ? detail.slice(0, 512) : "(no detail)", true);
  }
  return { t, m };
}

/** The REFUSE frame for a refusal found on this side (sent so that the other side logs the same reason). */
export function refuseFrame(e: JoinError): Uint8Array {
  return frame({ t: "refuse", reason: e.reason, detail: e.detail.slice(0, 512) });
}

/** A REFUSE frame's content without throwing (the responder's "no cluster here" answer carries its id). */
export function peekRefusal(f: Uint8Array): { reason: JoinRefusal; detail: string; id?: string } | undefined {
  try {
    decodeJoinFrame(f);
    return undefined;
  } catch (e) {
    if (!(e instanceof JoinError) || !e.remote) return undefined;
    const m = decodeMap(f.subarray(1), "refuse");
    const id = own(m, "id");
    return { reason: e.reason, detail: e.detail, ...(typeof id === "string" ? { id } : {}) };
  }
}

/** "no cluster here", with the responder's node id (founding: the lowest id founds). */
export function noClusterFrame(selfId: string): Uint8Array {
  return frame({ t: "refuse", reason: "no-cluster", detail: `${selfId} has no cluster yet`, id: selfId });
}

const u32 = (n: number): Uint8Array => {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n);
  return b;
};

function transcript(discover: Uint8Array, challenge: Uint8Array): Uint8Array {
  return sodium.crypto_generichash(32, concatBytes([L, u32(discover.length), discover, u32(challenge.length), challenge]));
}

function secretKey(secret: string): Uint8Array {
  return sodium.crypto_generichash(32, concatBytes([L, enc.encode(secret)]));
}

function mac(secret: string, label: Uint8Array, th: Uint8Array): Uint8Array {
  const k = secretKey(secret);
  const out = sodium.crypto_generichash(32, concatBytes([label, th]), k);
  sodium.memzero(k);
  return out;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

function keys(ephSecret: Uint8Array, peerEph: Uint8Array, th: Uint8Array): { j2r: Uint8Array; r2j: Uint8Array } {
  let shared: Uint8Array;
  try {
    shared = sodium.crypto_scalarmult(ephSecret, peerEph);
  } catch {
    throw new JoinError("forged", "ephemeral key is a low-order point");
  }
  if (sodium.is_zero(shared)) throw new JoinError("forged", "ephemeral key is a low-order point");
  const j2r = sodium.crypto_generichash(32, concatBytes([L_J2R, th]), shared);
  const r2j = sodium.crypto_generichash(32, concatBytes([L_R2J, th]), shared);
  sodium.memzero(shared);
  return { j2r, r2j };
}

function seal(key: Uint8Array, t: string, fields: Fields): Uint8Array {
  const plain = codec.encode(fields) as Uint8Array;
  const ct = sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(plain, enc.encode(t), null, ZERO_NONCE, key);
  return frame({ t, c: ct });
}

function open(key: Uint8Array, t: string, m: Fields): Fields {
  const ct = bytesField(m, "c");
  let plain: Uint8Array;
  try {
    plain = sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(null, ct, enc.encode(t), ZERO_NONCE, key);
  } catch {
    throw new JoinError("forged", `${t} does not open with this exchange's key`);
  }
  return decodeMap(plain, t);
}

function pubPem(key: KeyObject): string {
  return key.export({ type: "spki", format: "pem" }) as string;
}

function spki(key: KeyObject): Buffer {
  return key.export({ type: "spki", format: "der" });
}

function checkId(id: unknown, what: string): string {
  try {
    const v = validateNodeId(id, what);
    if (!isKeyFileId(v)) throw new Error(`${what} ${JSON.stringify(v)} cannot name a key file`);
    return v;
  } catch (e) {
    throw bad((e as Error).message);
  }
}

function parseKey(pem: string, what: string): KeyObject {
  try {
    return parsePeerPublicKey(pem, what);
  } catch (e) {
    throw bad((e as Error).message);
  }
}

// ------------------------------------------------------------------ pin

/**
 * What the joiner trusts the cluster key by: a fingerprint, or the cluster.pub of a shared cluster_pki_dir, or
 * (`own`) the key of the cluster this master holds cluster.pem of itself (a member probing a peer that refuses it).
 */
export type ClusterPin = { fingerprint: string; hashType: string } | { clusterPub: string; own?: boolean };

function pinMatches(pin: ClusterPin, pem: string): boolean {
  if ("fingerprint" in pin) return fingerprintMatches(pem, pin.fingerprint, pin.hashType);
  const a = spki(parseKey(pin.clusterPub, "cluster.pub"));
  return sameBytes(a, spki(parseKey(pem, "the cluster's key")));
}

// ------------------------------------------------------------------ joiner

export interface JoinerContext {
  clusterId: string;
  selfId: string;
  /** where this master's peer channel listens (the members dial it) */
  listen: { host: string; port: number };
  privateKey: KeyObject;
  publicKey: KeyObject;
  secret: string;
  /** absent: the joiner trusts no cluster key (it refuses every cluster, and says which option to set) */
  pin?: ClusterPin;
  now(): number;
  random(n: number): Uint8Array;
}

/** What a successful join hands the joiner's shell to install. */
export interface Admission {
  /** the responder's node id */
  via: string;
  clusterPem: string;
  clusterPub: string;
  aes: string;
  secret: string;
  /** node id -> master.pub of every member (the responder's included) */
  members: Record<string, string>;
  /** node id -> the member's peer-channel address, where the responder knows it */
  addresses: Record<string, { host: string; port: number }>;
}

export class JoinerExchange {
  readonly discover: Uint8Array;
  private readonly discoverBody: Uint8Array;
  private readonly eph: { publicKey: Uint8Array; privateKey: Uint8Array };
  private stage: "sent-discover" | "sent-proof" | "done" | "failed" = "sent-discover";
  private r2j: Uint8Array | undefined;
  private th: Uint8Array | undefined;
  private responder: { id: string; pub: string; clusterPub: string } | undefined;

  constructor(private readonly ctx: JoinerContext) {
    this.eph = sodium.crypto_kx_seed_keypair(ctx.random(32));
    this.discoverBody = codec.encode({
      v: JOIN_VERSION,
      cluster: ctx.clusterId,
      from: ctx.selfId,
      pub: pubPem(ctx.publicKey),
      host: ctx.listen.host,
      port: ctx.listen.port,
      eph: this.eph.publicKey,
      nonce: ctx.random(32),
      ts: ctx.now(),
    }) as Uint8Array;
    this.discover = frame({ t: "discover", m: this.discoverBody, sig: signWith(ctx.privateKey, concatBytes([L_DISCOVER, this.discoverBody])) });
  }

  private fail(e: unknown): never {
    this.stage = "failed";
    sodium.memzero(this.eph.privateKey);
    throw e instanceof JoinError ? e : bad((e as Error).message);
  }

  /** CHALLENGE → PROOF. Throws a JoinError (its `remote` says whether the responder refused). */
  onChallenge(f: Uint8Array): Uint8Array {
    if (this.stage !== "sent-discover") throw new JoinError("state", `CHALLENGE in stage ${this.stage}`);
    try {
      const { t, m } = decodeJoinFrame(f);
      if (t !== "challenge") throw new JoinError("state", `expected a challenge, got ${t}`);
      const body = bytesField(m, "m");
      const c = decodeMap(body, "challenge");
      if (own(c, "v") !== JOIN_VERSION) throw new JoinError("version", `the responder speaks join version ${String(own(c, "v"))}, this master ${JOIN_VERSION}`);
      const cluster = textField(c, "cluster", 256);
      if (cluster !== this.ctx.clusterId) throw new JoinError("cluster", `the responder is in cluster ${JSON.stringify(cluster)}, not ${JSON.stringify(this.ctx.clusterId)}`);
      const from = checkId(own(c, "from"), "responder id");
      if (from === this.ctx.selfId) throw new JoinError("duplicate-id", `the responder claims this master's own id ${JSON.stringify(from)}`);
      const pub = textField(c, "pub", pemBytesMax);
      const clusterPub = textField(c, "cluster_pub", pemBytesMax);
      if (!this.ctx.pin) {
        throw new JoinError("fingerprint", `${from} answered with a cluster, and this master cannot tell its key from an impostor's: set cluster_pub_fingerprint to the cluster.pub line of \`salt-key -F\` on a master of the cluster (its key is ${pemFinger(clusterPub)})`);
      }
      if ("clusterPub" in this.ctx.pin && this.ctx.pin.own && !pinMatches(this.ctx.pin, clusterPub)) {
        if (!verifyWith(parseKey(clusterPub, "the cluster key"), concatBytes([L_CLUSTER, transcript(this.discoverBody, body)]), bytesField(m, "csig", undefined, 1024))) throw new JoinError("forged", `${from} does not hold the cluster key it showed`);
        throw new JoinError("another-cluster", `${from} is in a second cluster named ${JSON.stringify(cluster)} with another key (${pemFinger(clusterPub)}; this master's cluster key is ${pemFinger(this.ctx.pin.clusterPub)}): two clusters were founded with one cluster_id and neither takes the other's masters; keep one, and start the masters of the other from empty directories to join it`);
      }
      if (!pinMatches(this.ctx.pin, clusterPub)) {
        const want = "fingerprint" in this.ctx.pin ? `cluster_pub_fingerprint ${this.ctx.pin.fingerprint}` : "the cluster.pub in cluster_pki_dir";
        const got = "fingerprint" in this.ctx.pin ? pemFinger(clusterPub, this.ctx.pin.hashType) : pemFinger(clusterPub);
        throw new JoinError("fingerprint", `${from}'s cluster key (${got}) is not the one ${want} names`);
      }
      const th = transcript(this.discoverBody, body);
      const ck = parseKey(clusterPub, "the cluster key");
      if (!verifyWith(ck, concatBytes([L_CLUSTER, th]), bytesField(m, "csig", undefined, 1024))) throw new JoinError("forged", `${from} does not hold the cluster key it showed`);
      const rk = parseKey(pub, `${from}'s key`);
      if (!verifyWith(rk, concatBytes([L_RESPONDER, th]), bytesField(m, "sig", undefined, 1024))) throw new JoinError("forged", `${from}'s signature does not verify with the key it showed`);
      const k = keys(this.eph.privateKey, bytesField(c, "eph", 32), th);
      sodium.memzero(this.eph.privateKey);
      this.r2j = k.r2j;
      this.th = th;
      this.responder = { id: from, pub, clusterPub };
      this.stage = "sent-proof";
      const out = seal(k.j2r, "proof", { mac: mac(this.ctx.secret, MAC_JOINER, th), sig: signWith(this.ctx.privateKey, concatBytes([L_JOINER, th])) });
      sodium.memzero(k.j2r);
      return out;
    } catch (e) {
      return this.fail(e);
    }
  }

  /** ADMIT → what to install. */
  onAdmit(f: Uint8Array): Admission {
    if (this.stage !== "sent-proof") throw new JoinError("state", `ADMIT in stage ${this.stage}`);
    try {
      const { t, m } = decodeJoinFrame(f);
      if (t !== "admit") throw new JoinError("state", `expected admit, got ${t}`);
      const a = open(this.r2j!, "admit", m);
      if (!sameBytes(bytesField(a, "mac", 32), mac(this.ctx.secret, MAC_RESPONDER, this.th!))) {
        throw new JoinError("secret", `${this.responder!.id} does not hold the same cluster_secret`);
      }
      const clusterPem = textField(a, "cluster_pem", pemBytesMax);
      let derived: string;
      try {
        derived = pubPem(createPublicKey(createPrivateKey(clusterPem)));
      } catch (e) {
        throw bad(`cluster.pem in ADMIT: ${(e as Error).message}`);
      }
      if (!sameBytes(spki(parseKey(derived, "cluster.pem")), spki(parseKey(this.responder!.clusterPub, "cluster.pub")))) {
        throw new JoinError("forged", "the cluster.pem handed out is not the key the challenge was signed with");
      }
      const rawMembers = own(a, "members");
      if (rawMembers === null || typeof rawMembers !== "object" || Array.isArray(rawMembers)) throw bad("members is not a map");
      const entries = Object.entries(rawMembers as Fields);
      if (entries.length > joinMembersMax) throw bad(`more than ${joinMembersMax} members`);
      const members: Record<string, string> = {};
      for (const [id, pem] of entries) {
        checkId(id, "member id");
        if (typeof pem !== "string" || pem.length > pemBytesMax) throw bad(`member ${id}'s key is not a PEM`);
        parseKey(pem, `member ${id}'s key`);
        if (id === this.ctx.selfId) continue;
        members[id] = pem;
      }
      members[this.responder!.id] = this.responder!.pub;
      const addresses = checkAddresses(own(a, "addresses"), members);
      this.stage = "done";
      sodium.memzero(this.r2j!);
      return {
        via: this.responder!.id,
        clusterPem,
        clusterPub: derived,
        aes: textField(a, "aes", textBytesMax),
        secret: textField(a, "secret", textBytesMax, true),
        members,
        addresses,
      };
    } catch (e) {
      return this.fail(e);
    }
  }

  /** Abandon (timeout, refusal): wipes what it holds. */
  abort(): void {
    if (this.stage === "done") return;
    this.stage = "failed";
    sodium.memzero(this.eph.privateKey);
    if (this.r2j) sodium.memzero(this.r2j);
  }
}

/** ADMIT's addresses: only members', each a host (no spaces, slashes) and a port. */
function checkAddresses(raw: unknown, members: Record<string, string>): Record<string, { host: string; port: number }> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== "object" || Array.isArray(raw)) throw bad("addresses is not a map");
  const out: Record<string, { host: string; port: number }> = {};
  for (const [id, v] of Object.entries(raw as Fields)) {
    if (!Object.hasOwn(members, id) || v === null || typeof v !== "object") continue;
    const host = own(v as Fields, "host");
    const port = own(v as Fields, "port");
    if (typeof host !== "string" || host.length === 0 || host.length > 255 || /[\s/\\@]/.test(host)) throw bad(`address of ${id} has no valid host`);
    if (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65535) throw bad(`address of ${id} has no valid port`);
    out[id] = { host, port };
  }
  return out;
}

/** DISCOVER's listen address of the joiner. */
function listenOf(d: Fields): { host: string; port: number } {
  const host = own(d, "host");
  const port = own(d, "port");
  if (typeof host !== "string" || host.length === 0 || host.length > 255 || /[\s/\\@]/.test(host)) throw bad("the joiner's host is not a host");
  if (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65535) throw bad("the joiner's port is not a port");
  return { host, port };
}

// ------------------------------------------------------------------ responder

/** What the responder needs of its master (read by its shell when a DISCOVER arrives). */
export interface ResponderContext {
  clusterId: string;
  selfId: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
  secret: string;
  /** cluster.pem and cluster.pub; absent: this master has no cluster yet (it answers no-cluster) */
  clusterKey?: { privateKey: KeyObject; pubPem: string };
  /** the key this cluster knows for a node id, if any */
  knownKey(id: string): KeyObject | undefined;
  /** whether the cluster log records `id` as removed (cluster.remove_member) and not re-admitted since */
  removed?(id: string): boolean;
  now(): number;
  random(n: number): Uint8Array;
}

/** What the admitted joiner's handing-out needs, read by the shell after it recorded the joiner's key. */
export interface AdmitMaterial {
  clusterPem: string;
  aes: string;
  members: Record<string, string>;
  addresses: Record<string, { host: string; port: number }>;
}

/** The joiner the responder's shell is to record (its key and where it listens). */
export interface Admitted {
  id: string;
  pub: string;
  host: string;
  port: number;
}

/**
 * DISCOVER nonces seen within the replay window (one per responder master, shared by its exchanges). Oldest
 * first; at most joinNoncesRememberedMax, and the `ts` window refuses anything older than what was forgotten.
 */
export class JoinReplayGuard {
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly windowMs = joinReplayWindowMs,
    private readonly max = joinNoncesRememberedMax,
  ) {}

  /** Throws a replay refusal, else remembers (id, nonce) at `now`. */
  check(id: string, nonce: Uint8Array, ts: number, now: number): void {
    if (!Number.isFinite(ts) || Math.abs(now - ts) > this.windowMs) {
      throw new JoinError("replay", `${id}'s DISCOVER is dated ${new Date(ts).toISOString()}, outside ±${this.windowMs / 1000} s of this master's clock (a replay, or clocks too far apart)`);
    }
    for (const [k, at] of this.seen) {
      if (now - at <= this.windowMs && this.seen.size < this.max) break;
      this.seen.delete(k);
    }
    const key = `${id}\u0000${Buffer.from(nonce).toString("hex")}`;
    if (this.seen.has(key)) throw new JoinError("replay", `${id}'s DISCOVER was seen before (a replayed join)`);
    this.seen.set(key, now);
  }
}

export class ResponderExchange {
  private stage: "started" | "sent-challenge" | "admitting" | "done" | "failed" = "started";
  private eph: { publicKey: Uint8Array; privateKey: Uint8Array } | undefined;
  private th: Uint8Array | undefined;
  private j2r: Uint8Array | undefined;
  private r2j: Uint8Array | undefined;
  private joiner: { id: string; pub: string; key: KeyObject; host: string; port: number } | undefined;
  /** the id a DISCOVER signed by the key it carries claims, kept for the log line of a refusal */
  private signedBy: string | undefined;

  constructor(
    private readonly ctx: ResponderContext,
    private readonly replay: JoinReplayGuard,
  ) {}

  /** the joiner's claimed id once DISCOVER parsed (authenticated only after PROOF) */
  get joinerId(): string | undefined {
    return this.joiner?.id ?? this.signedBy;
  }

  private fail(e: unknown): never {
    this.abort();
    throw e instanceof JoinError ? e : bad((e as Error).message);
  }

  /** DISCOVER → CHALLENGE (or a JoinError: the shell logs it and sends refuseFrame / noClusterFrame). */
  onDiscover(f: Uint8Array): Uint8Array {
    if (this.stage !== "started") throw new JoinError("state", `DISCOVER in stage ${this.stage}`);
    try {
      const { t, m } = decodeJoinFrame(f);
      if (t !== "discover") throw new JoinError("state", `expected discover, got ${t}`);
      const body = bytesField(m, "m", undefined, pemBytesMax * 2);
      const d = decodeMap(body, "discover");
      if (own(d, "v") !== JOIN_VERSION) throw new JoinError("version", `the joiner speaks join version ${String(own(d, "v"))}, this master ${JOIN_VERSION}`);
      const cluster = textField(d, "cluster", 256);
      const from = checkId(own(d, "from"), "joiner id");
      if (cluster !== this.ctx.clusterId) throw new JoinError("cluster", `${from} asks to join cluster ${JSON.stringify(cluster)}, this master is in ${JSON.stringify(this.ctx.clusterId)}`);
      if (from === this.ctx.selfId) throw new JoinError("duplicate-id", `${from} claims this master's own node id`);
      const pub = textField(d, "pub", pemBytesMax);
      const key = parseKey(pub, `${from}'s key`);
      if (!verifyWith(key, concatBytes([L_DISCOVER, body]), bytesField(m, "sig", undefined, 1024))) throw new JoinError("forged", `${from}'s DISCOVER is not signed by the key it carries`);
      this.signedBy = from;
      const known = this.ctx.knownKey(from);
      if (known && !sameBytes(spki(known), spki(key))) throw new JoinError("known-id", `node id ${from} is known to this cluster with another key (remove it with cluster.remove_member first, or give the new master its own id)`);
      if (this.ctx.removed?.(from)) throw new JoinError("removed", `${from} was removed from cluster ${this.ctx.clusterId} with cluster.remove_member; the secret does not admit it again: run salt-run cluster.readmit_member id=${from} on a member first`);
      const listen = listenOf(d);
      const ts = own(d, "ts");
      this.replay.check(from, bytesField(d, "nonce", 32), typeof ts === "number" ? ts : Number.NaN, this.ctx.now());
      if (!this.ctx.clusterKey) throw new JoinError("no-cluster", `${this.ctx.selfId} has no cluster yet`);
      this.eph = sodium.crypto_kx_seed_keypair(this.ctx.random(32));
      const cbody = codec.encode({
        v: JOIN_VERSION,
        cluster: this.ctx.clusterId,
        from: this.ctx.selfId,
        pub: pubPem(this.ctx.publicKey),
        cluster_pub: this.ctx.clusterKey.pubPem,
        eph: this.eph.publicKey,
        nonce: this.ctx.random(32),
      }) as Uint8Array;
      const th = transcript(body, cbody);
      const k = keys(this.eph.privateKey, bytesField(d, "eph", 32), th);
      sodium.memzero(this.eph.privateKey);
      this.th = th;
      this.j2r = k.j2r;
      this.r2j = k.r2j;
      this.joiner = { id: from, pub, key, ...listen };
      this.stage = "sent-challenge";
      return frame({
        t: "challenge",
        m: cbody,
        sig: signWith(this.ctx.privateKey, concatBytes([L_RESPONDER, th])),
        csig: signWith(this.ctx.clusterKey.privateKey, concatBytes([L_CLUSTER, th])),
      });
    } catch (e) {
      return this.fail(e);
    }
  }

  /** PROOF → the joiner to admit: the shell records its key cluster-wide, then calls admitted(). */
  onProof(f: Uint8Array): Admitted {
    if (this.stage !== "sent-challenge") throw new JoinError("state", `PROOF in stage ${this.stage}`);
    try {
      const { t, m } = decodeJoinFrame(f);
      if (t !== "proof") throw new JoinError("state", `expected proof, got ${t}`);
      const p = open(this.j2r!, "proof", m);
      const j = this.joiner!;
      if (!verifyWith(j.key, concatBytes([L_JOINER, this.th!]), bytesField(p, "sig", undefined, 1024))) throw new JoinError("forged", `${j.id}'s proof is not signed by its key`);
      if (!sameBytes(bytesField(p, "mac", 32), mac(this.ctx.secret, MAC_JOINER, this.th!))) {
        throw new JoinError("secret", `${j.id} does not know this cluster's cluster_secret`);
      }
      this.stage = "admitting";
      return { id: j.id, pub: j.pub, host: j.host, port: j.port };
    } catch (e) {
      return this.fail(e);
    }
  }

  /** The ADMIT frame, once the shell has recorded the joiner's key. */
  admitted(material: AdmitMaterial): Uint8Array {
    if (this.stage !== "admitting") throw new JoinError("state", `ADMIT in stage ${this.stage}`);
    const members: Record<string, string> = {};
    for (const [id, pem] of Object.entries(material.members).slice(0, joinMembersMax)) if (id !== this.joiner!.id) members[id] = pem;
    const addresses: Record<string, { host: string; port: number }> = {};
    for (const [id, a] of Object.entries(material.addresses)) if (Object.hasOwn(members, id)) addresses[id] = { host: a.host, port: a.port };
    const out = seal(this.r2j!, "admit", {
      addresses,
      mac: mac(this.ctx.secret, MAC_RESPONDER, this.th!),
      cluster_pem: material.clusterPem,
      aes: material.aes,
      secret: this.ctx.secret,
      members,
    });
    this.stage = "done";
    this.wipe();
    return out;
  }

  private wipe(): void {
    if (this.eph) sodium.memzero(this.eph.privateKey);
    if (this.j2r) sodium.memzero(this.j2r);
    if (this.r2j) sodium.memzero(this.r2j);
  }

  abort(): void {
    if (this.stage === "done") return;
    this.stage = "failed";
    this.wipe();
  }
}
