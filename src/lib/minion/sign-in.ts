/**
 * The minion's `_auth`: the sign-in load, and the checks Salt's `AsyncAuth` makes on the master's reply
 * (`salt/crypt.py: minion_sign_in_payload, handle_signin_response, verify_master, decrypt_aes,
 * extract_aes`), in Salt's order:
 *
 * 1. the reply must be a map with `load` (anything else is a failed attempt, retried later); a signed
 *    reply's `load` is msgpack bytes;
 * 2. if it carries `pub_key` (an accept): pinning — with a pinned master key and a `token` sent, `pub_key`
 *    must equal the pinned key (newlines ignored) or "The master key has changed"; without one the key is
 *    pinned now. Then the AES key: OAEP-decrypt `aes`, and `sig` (required) must X9.31-recover to the ASCII
 *    hex SHA-256 of that key string; when a `token` was sent, the reply's `token` must decrypt to it;
 * 3. once a master key is pinned, the outer `sig` (PKCS#1 v1.5, the minion's `sig_algo`) over the `load`
 *    bytes must verify;
 * 4. the inner `nonce` must equal the one sent;
 * 5. `ret`: False → rejected, "full" → full, anything else → pending;
 * 6. `master_finger`, if set, must match; `session` is decrypted (required for the v3 protocol).
 */
import { createHash, randomUUID } from "node:crypto";
import { BrineError } from "../../shared/errors.js";
import { generateKeyString } from "../../shared/protocol/crypticle.js";
import { asBytes, decodeWire, isMap, type WireValue } from "../../shared/protocol/msgpack.js";
import { cleanKey, pemFinger } from "../../shared/protocol/pem.js";
import { DEFAULT_ENC_ALGO, DEFAULT_SIG_ALGO, oaepDecrypt, oaepEncrypt, publicKey, rsaVerify, type EncAlgo, type SigAlgo } from "../../shared/protocol/rsa.js";
import { x931Recover } from "../../shared/protocol/x931.js";
import type { MinionKeys } from "./keys.js";

/** v3 = 3006.12+/3007.4+ (session key, envelope id); v2 = older minions (global AES key). */
export type Protocol = "v3" | "v2";

export interface SignInConfig {
  id: string;
  keys: MinionKeys;
  protocol: Protocol;
  encAlgo: EncAlgo;
  sigAlgo: SigAlgo;
  /** send `enc_algo`/`sig_algo` (3006.9+/3007.2+). v3 always does; v2 does not by default, like 3006.8. */
  sendAlgos: boolean;
  /** the minion's `master_finger`: pem_finger of the master key, checked after sign-in */
  masterFinger?: string;
  /** `autosign_grains` to send (grain → value) */
  autosignGrains?: Record<string, unknown>;
}

/** What a minion keeps between sign-ins: the pinned master key (minion_master.pub) and its random token. */
export interface SignInState {
  /** the master public key as received the first time (Salt's minion_master.pub); undefined = not pinned */
  masterPub?: string;
  /** the minion's random 76-character token (new at every minion start in Salt) */
  token: string;
}

export function newSignInState(masterPub?: string): SignInState {
  return { masterPub, token: generateKeyString() };
}

export interface AuthRequest {
  /** the clear envelope `{enc, load, version}` */
  envelope: { enc: "clear"; load: Record<string, unknown>; version: number };
  load: Record<string, unknown>;
  nonce: string;
  /** whether `token` was sent (the minion had a pinned master key) */
  tokenSent: boolean;
}

export function envelopeVersion(p: Protocol): number {
  return p === "v3" ? 3 : 2;
}

export function newNonce(): string {
  return randomUUID().replace(/-/g, "");
}

/** The `_auth` request. `nonce` can be fixed (tests replaying a capture). */
export function buildAuthRequest(cfg: SignInConfig, state: SignInState, opts: { nonce?: string } = {}): AuthRequest {
  const nonce = opts.nonce ?? newNonce();
  const load: Record<string, unknown> = { cmd: "_auth", id: cfg.id, nonce };
  if (cfg.sendAlgos || cfg.protocol === "v3") {
    load.enc_algo = cfg.encAlgo;
    load.sig_algo = cfg.sigAlgo;
  }
  if (cfg.autosignGrains) load.autosign_grains = cfg.autosignGrains;
  let tokenSent = false;
  if (state.masterPub !== undefined) {
    load.token = oaepEncrypt(publicKey(state.masterPub), Buffer.from(state.token, "latin1"), encAlgoOf(cfg));
    tokenSent = true;
  }
  load.pub = cfg.keys.pub;
  return { envelope: { enc: "clear", load, version: envelopeVersion(cfg.protocol) }, load, nonce, tokenSent };
}

export interface Creds {
  /** the master's publish AES key string */
  aes: string;
  /** the per-minion session key string (v3 requests); undefined from masters that send none */
  session?: string;
  publishPort: number;
  /** the master public key (pinned) */
  masterPub: string;
}

export type SignInOutcome =
  | { result: "accepted"; creds: Creds }
  | { result: "pending" }
  | { result: "rejected" }
  | { result: "full" }
  /** not a sign-in reply at all (e.g. a busy master's `{"error": …}`): Salt logs "Sign-in attempt failed" and tries again later */
  | { result: "failed"; detail: string };

function summarize(v: WireValue): string {
  try {
    const text = JSON.stringify(v, (_k, x) => (Buffer.isBuffer(x) ? `<${x.length} bytes>` : typeof x === "bigint" ? String(x) : x));
    return text.length > 160 ? `${text.slice(0, 160)}…` : text;
  } catch {
    return String(v);
  }
}

function invalid(detail: string): BrineError {
  return new BrineError("MINION_AUTH_INVALID", detail);
}

function stripNewlines(s: string): string {
  return s.replace(/[\r\n]/g, "");
}

function encAlgoOf(cfg: SignInConfig): EncAlgo {
  return cfg.sendAlgos || cfg.protocol === "v3" ? cfg.encAlgo : DEFAULT_ENC_ALGO;
}

function sigAlgoOf(cfg: SignInConfig): SigAlgo {
  return cfg.sendAlgos || cfg.protocol === "v3" ? cfg.sigAlgo : DEFAULT_SIG_ALGO;
}

/** Salt's decrypt_aes + extract_aes: the AES key string, or "" when a check fails. */
function extractAes(cfg: SignInConfig, state: SignInState, p: Record<string, WireValue>, masterPubSent: boolean): string {
  const priv = cfg.keys.privateKey;
  const aesBlob = asBytes(p.aes);
  if (!aesBlob) return "";
  let keyStr: string;
  try {
    keyStr = oaepDecrypt(priv, aesBlob, encAlgoOf(cfg)).toString("latin1");
  } catch {
    return "";
  }
  const sig = asBytes(p.sig);
  if (!sig || state.masterPub === undefined) return "";
  const digest = createHash("sha256").update(Buffer.from(keyStr, "latin1")).digest("hex");
  let recovered: Buffer;
  try {
    recovered = x931Recover(publicKey(state.masterPub), sig);
  } catch {
    return "";
  }
  if (recovered.toString("latin1") !== digest) return "";
  if (!masterPubSent) return keyStr;
  const tokBlob = asBytes(p.token);
  if (!tokBlob) return "";
  try {
    const tok = oaepDecrypt(priv, tokBlob, encAlgoOf(cfg)).toString("latin1");
    return tok === state.token ? keyStr : "";
  } catch {
    return "";
  }
}

/**
 * Check the master's reply to `req` as Salt does. Pins the master key in `state` on first contact.
 * Throws a coded error (MINION_AUTH_INVALID, MINION_MASTER_KEY_CHANGED, MINION_BAD_ALGO) when the
 * reply must not be trusted.
 */
export function handleAuthReply(cfg: SignInConfig, state: SignInState, req: AuthRequest, reply: WireValue): SignInOutcome {
  if (!isMap(reply) || !("load" in reply)) return { result: "failed", detail: `Sign-in attempt failed: ${summarize(reply)}` };
  const rawLoad = reply.load;
  if (isMap(rawLoad)) {
    // unsigned clear reply: only the algorithm refusals come back like this
    const ret = rawLoad.ret;
    if (ret === "bad enc algo" || ret === "bad sig algo") throw new BrineError("MINION_BAD_ALGO", ret);
    throw invalid("unsigned sign-in reply");
  }
  const loadBytes = asBytes(rawLoad);
  if (!loadBytes) throw invalid("sign-in reply load is not bytes");
  let payload: WireValue;
  try {
    payload = decodeWire(loadBytes);
  } catch (e) {
    throw invalid(`sign-in reply load does not decode: ${(e as Error).message}`);
  }
  if (!isMap(payload)) throw invalid("sign-in reply load is not a map");

  let aes = "";
  if ("pub_key" in payload) {
    if (typeof payload.pub_key !== "string") throw invalid("pub_key is not text");
    if (state.masterPub !== undefined && req.tokenSent) {
      if (stripNewlines(payload.pub_key) !== stripNewlines(state.masterPub)) {
        throw new BrineError("MINION_MASTER_KEY_CHANGED", "the salt master could have been subverted, verify salt master's public key");
      }
      aes = extractAes(cfg, state, payload, true);
    } else {
      if (state.masterPub === undefined) state.masterPub = payload.pub_key; // Salt writes minion_master.pub here
      aes = extractAes(cfg, state, payload, false);
    }
    if (!aes) throw invalid("The Salt Master server's public key did not authenticate");
  }

  if (state.masterPub !== undefined) {
    const sig = asBytes(reply.sig);
    if (!sig || !rsaVerify(publicKey(state.masterPub), loadBytes, sig, sigAlgoOf(cfg))) {
      throw invalid("The payload signature did not validate");
    }
  }
  if (payload.nonce !== req.nonce) throw invalid("The payload nonce did not validate");

  if ("ret" in payload) {
    if (!payload.ret) return { result: "rejected" };
    if (payload.ret === "full") return { result: "full" };
    return { result: "pending" };
  }
  if (!aes) throw invalid("sign-in reply has neither pub_key nor ret");

  if (cfg.masterFinger && pemFinger(state.masterPub!) !== cfg.masterFinger) {
    throw invalid(`master_finger ${cfg.masterFinger} does not match the master key`);
  }
  const port = payload.publish_port;
  if (typeof port !== "number" || !Number.isInteger(port) || port <= 0 || port > 65535) throw invalid("publish_port is missing");
  let session: string | undefined;
  const sessionBlob = cfg.protocol === "v3" ? asBytes(payload.session) : undefined; // v2 minions ignore it
  if (sessionBlob) {
    try {
      session = oaepDecrypt(cfg.keys.privateKey, sessionBlob, encAlgoOf(cfg)).toString("latin1");
    } catch {
      throw invalid("session key does not decrypt");
    }
  }
  if (cfg.protocol === "v3" && !session) throw invalid("no session key in the reply (required by the v3 protocol)");
  return { result: "accepted", creds: { aes, session, publishPort: port, masterPub: cleanKey(state.masterPub!) } };
}
