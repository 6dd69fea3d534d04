/**
 * `_auth`: gathers the facts for decideAuth from the pki directory, applies the file effects, fires
 * `salt/auth`, and builds the signed reply (§3.3): accept replies carry the AES key, the session key
 * and the echoed token under the minion's key, the X9.31 signature of the AES key digest, and the
 * nonce; refusals carry only ret + nonce. Both are `_clear_signed` for protocol ≥ 2.
 */
import { createHash } from "node:crypto";
import { getLogger } from "../../shared/log.js";
import { asBytes, binHeaderBytes, encodeWire, isMap, writeBinHeader, type WireValue } from "../../shared/protocol/msgpack.js";
import { Framed } from "./framed.js";
import { cleanKey } from "../../shared/protocol/pem.js";
import { cachedPublicKey, DEFAULT_ENC_ALGO, DEFAULT_SIG_ALGO, isEncAlgo, isSigAlgo, oaepDecrypt, oaepEncrypt, publicKey, rsaSign, type SigAlgo } from "../../shared/protocol/rsa.js";
import { x931Sign } from "../../shared/protocol/x931.js";
import { validId } from "../../shared/protocol/ids.js";
import { rsaBlockBytesMax } from "../../shared/protocol/limits.js";
import { checkAutoreject, checkAutosign } from "../../lib/pki/autosign.js";
import { decideAuth, type AuthFileOp } from "./auth-decision.js";
import type { Effects, MasterContext } from "./context.js";
import type { KeyState } from "../../lib/pki/key-store.js";
import { checkMinionPublicKey } from "../../lib/pki/minion-key-check.js";
import { minionPolicy, type MinionPolicy } from "./minion-policy.js";
import { CLEAR_SIGNED_HEAD } from "./replies.js";
import type { KeyObject } from "node:crypto";

const log = getLogger("brine.auth");

/** Longest `pub` PEM accepted (a 4096-bit SPKI PEM is ~800 bytes). */
export const pubPemBytesMax = 4096;

function clearSigned(ctx: MasterContext, load: Record<string, unknown>, sigAlgo: SigAlgo, version: number): unknown {
  if (version < 2) return { enc: "clear", load };
  const tosign = encodeWire(load);
  return new Framed(clearSignedFrame(tosign, rsaSign(ctx.masterPriv, tosign, sigAlgo)));
}

const SIG_KEY = Buffer.from([0xa3, ...Buffer.from("sig")]);

/**
 * `{"enc": "clear", "load": <tosign>, "sig": <sig>}` as encodeWire packs it (Salt's `_clear_signed` reply),
 * written once into its frame instead of packing the signed load's bytes a second time.
 */
export function clearSignedFrame(tosign: Buffer, sig: Buffer): Buffer {
  const out = Buffer.allocUnsafe(CLEAR_SIGNED_HEAD.length + binHeaderBytes(tosign.length) + tosign.length + SIG_KEY.length + binHeaderBytes(sig.length) + sig.length);
  let pos = CLEAR_SIGNED_HEAD.copy(out, 0);
  pos = writeBinHeader(out, pos, tosign.length);
  pos += tosign.copy(out, pos);
  pos += SIG_KEY.copy(out, pos);
  pos = writeBinHeader(out, pos, sig.length);
  sig.copy(out, pos);
  return out;
}

function applyOps(ctx: MasterContext, id: string, pub: string, ops: AuthFileOp[]): void {
  for (const op of ops) {
    if (op.op === "write") ctx.keys.write(op.state as KeyState, id, pub);
    else if (op.op === "move") ctx.keys.move(op.from, op.to, id);
    else ctx.keys.remove(op.state, id);
  }
  if (ops.length) ctx.acceptedKeys.invalidate(id);
}

/**
 * The X9.31 signature of the AES key's digest is the same for every minion until the key rotates, so
 * it is made once per key: one private-key operation fewer per sign-in.
 */
const aesSigCache = new WeakMap<MasterContext, { key: string; sig: Buffer }>();
function aesKeySignature(ctx: MasterContext, aesKey: string): Buffer {
  const c = aesSigCache.get(ctx);
  if (c && c.key === aesKey) return c.sig;
  const digest = createHash("sha256").update(aesKey, "latin1").digest("hex");
  const sig = x931Sign(ctx.masterPriv, Buffer.from(digest, "latin1"));
  aesSigCache.set(ctx, { key: aesKey, sig });
  return sig;
}

/** How long a thread trusts its count of `minions_pre` (a storm of new ids reads the directory this often). */
const pendingCountTtlMs = 1000;
const pendingCounts = new WeakMap<MasterContext, { count: number; at: number }>();

/**
 * True when `minions_pre` already holds `max` keys (a new minion's key would be one too many). The count is
 * read at most once a second per thread and counts this thread's own writes since, so an auth storm of new
 * ids does not list a directory of `max` entries per request.
 */
function pendingKeysFull(ctx: MasterContext, max: number): boolean {
  const now = ctx.now();
  let c = pendingCounts.get(ctx);
  if (!c || now - c.at >= pendingCountTtlMs) {
    c = { count: ctx.keys.list("pending").length, at: now };
    pendingCounts.set(ctx, c);
  }
  if (c.count >= max) return true;
  c.count++; // the key about to be written
  return false;
}

/**
 * Per minion policy, the parsed accepted keys (the thread's cached KeyObjects, rsa.ts) this thread found acceptable:
 * the cache holds one KeyObject per PEM text, so the same object is the same text, and its check (PEM form, RSA,
 * exponent, size) gives the same answer under the same policy. A returning minion's key is checked once per thread,
 * not at every sign-in; any other key at every one.
 */
const acceptableKeys = new WeakMap<MinionPolicy, WeakSet<KeyObject>>();
function keysAcceptable(policy: MinionPolicy): WeakSet<KeyObject> {
  let set = acceptableKeys.get(policy);
  if (!set) acceptableKeys.set(policy, (set = new WeakSet()));
  return set;
}
/** True when `acceptedPem` (a minion's accepted key, cleaned) is parsed in this thread and was found acceptable under `policy`. */
function acceptableBefore(policy: MinionPolicy, acceptedPem: string | undefined): boolean {
  if (acceptedPem === undefined) return false;
  const key = cachedPublicKey(acceptedPem);
  return key !== undefined && keysAcceptable(policy).has(key);
}

/** True when `raw` is `clean` (a clean_key text) or `clean` and a newline: clean_key(raw) is `clean` then, without splitting lines. */
function sameAsClean(raw: string, clean: string): boolean {
  return raw === clean || (raw.length === clean.length + 1 && raw.charCodeAt(clean.length) === 10 && raw.startsWith(clean));
}

/** One `_auth`, counted by its result (Salt's `act`, or invalid) on the metrics board. */
export function handleAuth(ctx: MasterContext, load: Record<string, WireValue>, version: number, fx: Effects): unknown {
  const counted = { act: "invalid" };
  const reply = authReply(ctx, load, version, fx, counted);
  ctx.metrics.auth(counted.act);
  return reply;
}

function authReply(ctx: MasterContext, load: Record<string, WireValue>, version: number, fx: Effects, counted: { act: string }): unknown {
  const encAlgoRaw = load.enc_algo ?? DEFAULT_ENC_ALGO;
  const sigAlgoRaw = load.sig_algo ?? DEFAULT_SIG_ALGO;
  if (!isEncAlgo(encAlgoRaw)) return { enc: "clear", load: { ret: "bad enc algo" } };
  if (!isSigAlgo(sigAlgoRaw)) return { enc: "clear", load: { ret: "bad sig algo" } };
  const encAlgo = encAlgoRaw;
  const sigAlgo = sigAlgoRaw;
  const nonce = typeof load.nonce === "string" ? load.nonce : undefined;
  const id = load.id;
  const rawPub = typeof load.pub === "string" ? load.pub : "";
  const refuse = (ret: unknown) => clearSigned(ctx, nonce === undefined ? { ret } : { ret, nonce }, sigAlgo, version);

  if (!validId(id)) {
    log.info(`Authentication request from invalid id ${JSON.stringify(String(id)).slice(0, 80)}`);
    return refuse(false);
  }
  if (rawPub.length > pubPemBytesMax) {
    log.warning(`Authentication request from ${id} with an oversized public key`);
    return refuse(false);
  }
  const cfg = ctx.cfg;
  const policy = minionPolicy(cfg);
  if (version < policy.minEnvelopeVersion) {
    log.warning(`Authentication request from ${id} refused: protocol version ${version} is below brine_min_envelope_version (${policy.minEnvelopeVersion})`);
    return refuse(false);
  }
  // the thread's copy while the key file is the one it was read from (one stat instead of a read: AcceptedKeyCache)
  const acceptedKey = ctx.acceptedKeys.getFresh(id);
  const accepted = acceptedKey?.pem;
  // a returning minion sends its key as it was accepted (a Salt minion reads its minion.pub: a trailing newline);
  // clean_key of that text is the accepted (clean) text itself
  const pub = accepted !== undefined && sameAsClean(rawPub, accepted) ? accepted : cleanKey(rawPub);
  const readClean = (s: KeyState) => {
    const v = ctx.keys.read(s, id);
    return v === undefined ? undefined : cleanKey(v);
  };
  if (rawPub && !acceptableBefore(policy, pub === accepted ? pub : undefined)) {
    // before anything is written: an unacceptable key never reaches pki_dir. A returning minion's key is the
    // accepted one, whose parse the thread's key cache holds (it encrypts the replies); any other key is parsed
    // here and not cached (a spray of new keys must not fill the cache)
    const check = checkMinionPublicKey(pub, policy, pub === accepted ? publicKey : undefined);
    if (!check.ok) {
      log.warning(`Authentication request from ${id} refused: its public key is ${check.why}`);
      return refuse(false);
    }
    if (pub === accepted) keysAcceptable(policy).add(check.key);
  }
  const fire = (result: unknown, act: string) => {
    counted.act = act;
    if (cfg.auth_events) ctx.fire(fx, "salt/auth", { result, act, id, pub: rawPub }, true);
  };
  const rejectedExists = ctx.keys.exists("rejected", id);
  // The pending key and the autosign/autoreject checks only matter for a key that is neither accepted
  // nor rejected (rows 7-13): a returning minion's sign-in skips those file checks entirely.
  const undecided = accepted === undefined && !rejectedExists && !cfg.open_mode;
  const pendingIsDir = undecided && ctx.keys.isDirectory("pending", id);
  const grains = isMap(load.autosign_grains) ? (load.autosign_grains as Record<string, unknown>) : undefined;
  const outcome = decideAuth({
    idValid: true,
    pub,
    openMode: cfg.open_mode,
    full: cfg.max_minions > 0 && accepted === undefined && ctx.acceptedIds().length >= cfg.max_minions,
    rejectedExists,
    accepted,
    pending: undecided && !pendingIsDir ? readClean("pending") : undefined,
    pendingIsDir,
    autoreject: undecided && checkAutoreject(cfg, id),
    autosign: undecided && checkAutosign(cfg, ctx.keys, id, grains, ctx.now()),
  });

  if (outcome.kind === "invalid") return refuse(false);
  if (outcome.kind === "full") {
    log.info(`Authentication of ${id} refused: max_minions (${cfg.max_minions}) reached`);
    fire(false, "full");
    return refuse("full");
  }
  if (outcome.kind === "refuse") {
    if (outcome.ops.length && !pub) return refuse(false);
    if (outcome.ops.some((op) => op.op === "write" && op.state === "pending") && pendingKeysFull(ctx, policy.pendingKeysMax)) {
      log.warning(`Authentication of ${id} refused: max_pending_keys (${policy.pendingKeysMax}) keys already wait for acceptance; its key is not stored`);
      fire(false, "full");
      return refuse("full");
    }
    applyOps(ctx, id, rawPub, outcome.ops);
    if (outcome.event) fire(outcome.event.result, outcome.event.act);
    log.info(`Authentication of ${id}: ${outcome.event?.act ?? "refused"}`);
    return refuse(outcome.ret);
  }

  // accept
  if (!pub) return refuse(false);
  let minionKey;
  try {
    minionKey = publicKey(pub);
  } catch {
    log.warning(`Authentication request from ${id} with an unparsable public key`);
    return refuse(false);
  }
  applyOps(ctx, id, rawPub, outcome.ops);
  const { crypticle } = ctx.aes();
  const aesKey = crypticle.keyString;
  const session = ctx.sessions.get(id).key;
  const reply: Record<string, unknown> = { enc: "pub", pub_key: ctx.masterPubClean, publish_port: cfg.publish_port };
  // master_sign_pubkey: the signature of pub_key for minions with verify_master_pubkey_sign (pki/master-sign.ts)
  if (ctx.pubSigner) reply.pub_sig = ctx.pubSigner.pubSig(sigAlgo);
  const tokenIn = asBytes(load.token);
  if (tokenIn && tokenIn.length <= rsaBlockBytesMax) {
    try {
      const token = oaepDecrypt(ctx.masterPriv, tokenIn, encAlgo);
      reply.token = oaepEncrypt(minionKey, token, encAlgo);
    } catch {
      // a token that does not decrypt is omitted, as Salt omits it; the minion then refuses us
    }
  }
  // kept by the accepted key's tag when it is the same key (a new key's are made again at its next sign-in)
  const sealed = ctx.authCiphers.ciphertexts(id, pub === accepted ? acceptedKey!.tag : 0, minionKey, encAlgo, aesKey, session);
  reply.aes = sealed.aes;
  reply.session = sealed.session;
  reply.sig = aesKeySignature(ctx, aesKey);
  if (nonce !== undefined) reply.nonce = nonce;
  if (version >= 3) ctx.v3Marks.mark(id); // from now on a v2 request in this id's name is refused
  fire(true, "accept");
  log.debug(`Authentication of ${id}: accepted`);
  return clearSigned(ctx, reply, sigAlgo, version);
}
