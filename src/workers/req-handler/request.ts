/**
 * One request frame in, exactly one reply frame out (Salt's ReqServerChannel.handle_message, hardened).
 *
 * Order: size + strict decode → envelope shape → decrypt (v3: session key of the envelope id; v2: the
 * current publish key) → nonce, ttl, id and tok checks → replay check (clustered, for a minion another master
 * owns: then its nonce decider's word, nonce-owner-client.ts) → dispatch (`_auth` and
 * `publish` clear; AES allow-list) → encrypt the reply with the request's nonce. Every refusal is a
 * reply with Salt's wording and a log line; nothing is written for a refused request.
 */
import { getLogger } from "../../shared/log.js";
import { BrineError, isBrineError } from "../../shared/errors.js";
import { Crypticle, generateKeyString } from "../../shared/protocol/crypticle.js";
import { validId } from "../../shared/protocol/ids.js";
import { asBytes, decodeWire, encodeWire, isMap, wireLimits, type DecodeLimits, type DecodeTally, type MapEntrySpans, type WireValue } from "../../shared/protocol/msgpack.js";
import { DEFAULT_ENC_ALGO, DEFAULT_SIG_ALGO, isEncAlgo, isSigAlgo, oaepEncrypt, rsaSign } from "../../shared/protocol/rsa.js";
import { x931Verify } from "../../shared/protocol/x931.js";
import { bigEnvelopeDepthMax, bigEnvelopeElementsMax, clearFrameBytesMax, largeClearElementsMax, frameBytesMax, rsaBlockBytesMax } from "../../shared/protocol/limits.js";
import { LogBudget } from "../../shared/log-budget.js";
import { AES_FUNCS, type AesResult } from "./aes-funcs.js";
import { handleAuth } from "./auth.js";
import { minionPolicy } from "./minion-policy.js";
import { handlePublish } from "./publish.js";
import { CLEAR_COMMANDS, handleClearCommand } from "./clear-funcs.js";
import type { Effects, MasterContext } from "./context.js";
import { requestTsWindowS, staleTs } from "./replay-window.js";
import { Framed } from "./framed.js";
import { commandNeedsDecider, frameAction } from "../../shared/nonce-owner.js";
import { MEMO_COPY, MEMO_FRESH, MEMO_NONE, resendTagBytes } from "../../shared/nonce-replies.js";
import { acceptedKeyWaitMsMax, sessionKeyWaitMsMax } from "./session-wait.js";

import { CMD_NONE, cmdSlotOf } from "../../shared/metrics/labels.js";

type AesHandler = NonNullable<ReturnType<(typeof AES_FUNCS)["get"]>>;

const log = getLogger("brine.request");
const SALT = Buffer.from("salt");

/**
 * Clear commands a client may send (Salt's ClearFuncs.expose_methods); everything else gets `{}`
 * (CVE-2020-11651: no other method is reachable). All but `_auth` are authenticated by their own
 * credentials: see clear-funcs.ts and src/lib/auth/.
 */
const CLEAR_FUNCS = new Set(["_auth", "publish", ...CLEAR_COMMANDS]);
/** Clear commands that may exceed clearFrameBytesMax (up to brine_clear_request_bytes_max): they carry arguments. */
const LARGE_CLEAR_COMMANDS = new Set(["publish", "runner", "wheel"]);

export const BAD_LOAD = "bad load";

/** The metrics `cmd` slot of the request handleRequest last took, set before it first waits (metrics/labels.ts). */
let cmdSlot = CMD_NONE;
export function lastCmdSlot(): number {
  return cmdSlot;
}
/**
 * For a request handleRequest last took that waits for its minion's key (undecodable until then: its slot is
 * CMD_NONE at first): the holder of its `cmd` slot, filled in when it is handled after the wait; else undefined.
 */
let cmdLater: { slot: number } | undefined;
export function lastCmdLater(): { slot: number } | undefined {
  return cmdLater;
}
/**
 * What the request handleRequest last took is for the main thread's reply memory (src/shared/nonce-replies.ts),
 * set before the request first waits: undefined for a request without a nonce; MEMO_NONE while a request waits for
 * its session key (filled in when it is handled after the wait, or left so); else MEMO_FRESH (an accepted nonce:
 * its reply is remembered under `key`) or MEMO_COPY (a nonce seen already, here or by its decider: the reply is the
 * main thread's, a remembered one or a refusal). A request that waits for its decider may turn from the one into
 * the other before its reply is ready; the worker reads the kind then.
 */
export interface Memo {
  kind: number;
  key: string;
  /** a copy's command and minion, for the main thread's log line */
  what: string;
}
let memo: Memo | undefined;
export function lastMemo(): Memo | undefined {
  return memo;
}
/** the elements of the decode running now (one per thread: decodes are synchronous) */
const tally: DecodeTally = { elements: 0 };
/** Whether the request handleRequest last took was refused for its worker's decode budget (worker.ts counts them). */
let overBudget = false;
export function lastOverBudget(): boolean {
  return overBudget;
}
/** what a request waited for before (session-wait.ts): handled again once it came, it does not wait for it twice */
const WAITED_SESSION_KEY = 1;
const WAITED_ACCEPTED_KEY = 2;
let waitedFor = 0;
/** that request's memo, made when it began to wait (the worker took it then), to be filled in */
let adoptMemo: Memo | undefined;
/** and its cmd slot's holder, the same however many waits it goes through */
let adoptCmd: { slot: number } | undefined;
/** requests that waited for a session key in vain, or could not wait: at most 10 lines a minute per thread */
const keyWaitLog = new LogBudget(10, 60_000, (l) => log.warning(l), "requests sealed with a session key this master does not hold");
/** decode-budget refusals: at most 20 lines a minute per thread, then a count */
const budgetLog = new LogBudget(20, 60_000, (l) => log.warning(l), "requests refused for the decode budget");

/** Whether the request handleRequest last took was answered without waiting (its promise is already settled). */
let answeredAtOnce = true;
export function lastAnsweredAtOnce(): boolean {
  return answeredAtOnce;
}

function short(v: unknown): string {
  try {
    return JSON.stringify(v, (_k, x) => (Buffer.isBuffer(x) ? `<${x.length} bytes>` : typeof x === "bigint" ? String(x) : x)).slice(0, 200);
  } catch {
    return String(v).slice(0, 200);
  }
}

function checkTok(ctx: MasterContext, id: string, tok: WireValue | undefined): boolean {
  const tokBytes = asBytes(tok);
  if (!tokBytes || tokBytes.length > rsaBlockBytesMax) return false;
  const accepted = ctx.acceptedKeys.get(id);
  if (accepted === undefined) {
    log.warning(`Salt minion claiming to be ${id} attempted to communicate with master, but key could not be read and verification was denied.`);
    return false;
  }
  // a minion sends the same tok (X9.31 is deterministic) until it signs in anew: the one verified against this key needs no RSA
  if (ctx.acceptedKeys.tokVerified(id, accepted, tokBytes)) return true;
  const key = ctx.parsedKey(accepted.pem);
  if (!key || !x931Verify(key, tokBytes, SALT)) {
    log.error(`Minion token did not validate: ${id}`);
    return false;
  }
  ctx.acceptedKeys.tokVerifiedNow(id, accepted, tokBytes);
  return true;
}

function encryptPrivate(ctx: MasterContext, ret: unknown, id: string, nonce: string | undefined, encAlgo: string, sigAlgo: string): unknown {
  const minionKey = ctx.minionPublicKey(id);
  if (!minionKey) {
    log.error("AES key not found");
    return { error: "AES key not found" };
  }
  if (nonce === undefined) return { error: "Nonce not included in request" };
  const oneTime = generateKeyString();
  const key = oaepEncrypt(minionKey, Buffer.from(oneTime, "latin1"), isEncAlgo(encAlgo) ? encAlgo : DEFAULT_ENC_ALGO);
  const tosign = encodeWire({ key, pillar: ret === false ? {} : ret, nonce });
  const sig = rsaSign(ctx.masterPriv, tosign, isSigAlgo(sigAlgo) ? sigAlgo : DEFAULT_SIG_ALGO);
  return { key, pillar: new Crypticle(oneTime).dumps({ data: tosign, sig }) };
}

function failed(e: unknown): Buffer {
  log.error(`Some exception handling a payload from minion: ${(e as Error).stack ?? e}`);
  return encodeWire("Some exception handling minion payload");
}

/**
 * Handle one request body; always resolves to the reply body. Not an async function on purpose: most
 * requests are answered without waiting (or wait once, for their durable write), and every async layer
 * costs a promise and a suspended frame per request on the hot path.
 */
export function handleRequest(ctx: MasterContext, frame: Buffer, fx: Effects, source?: string): Promise<Buffer> {
  try {
    const reply = handle(ctx, frame, fx, source);
    answeredAtOnce = !(reply instanceof Promise);
    // what its decodes hold (decode-budget.ts): given back once its reply is ready, or now (a handler let go)
    const held = ctx.decodeBudget.detach();
    if (reply instanceof Promise) {
      if (held === 0) return reply.then(toFrame, failed);
      // the decoded load is kept until the reply is ready (a handler that waits may still read it)
      const give = () => ctx.decodeBudget.give(held);
      return reply.then(
        (r) => (give(), toFrame(r)),
        (e) => (give(), failed(e)),
      );
    }
    ctx.decodeBudget.give(held);
    return Promise.resolve(toFrame(reply));
  } catch (e) {
    answeredAtOnce = true;
    ctx.decodeBudget.letGo();
    return Promise.resolve(failed(e));
  }
}

/**
 * `limits` as the decode budget allows for a decode of `bytes` bytes now (the same object when it allows all of
 * them), or undefined when it allows none: the request is refused (overBudgetRefusal).
 */
function budgeted(ctx: MasterContext, bytes: number, limits: DecodeLimits): DecodeLimits | undefined {
  const room = ctx.decodeBudget.elementsFor(bytes, limits.elementsMax);
  if (room < 0) return undefined;
  return room < limits.elementsMax ? { ...limits, elementsMax: room } : limits;
}

/** Whether a decode under `used` failed only for the budget (it would have gone on under the request's own `limits`). */
function stoppedByBudget(e: unknown, used: DecodeLimits | undefined, limits: DecodeLimits): boolean {
  return used === undefined || (used !== limits && isBrineError(e, "MSGPACK_TOO_MANY"));
}

/** The log line and flag of a request refused for its worker's decode budget; the caller answers it "bad load". */
function overBudgetRefusal(ctx: MasterContext, what: string, bytes: number): void {
  overBudget = true;
  budgetLog.line(`${what} of ${bytes} bytes refused: decoding it would pass this request thread's decode budget (${ctx.decodeBudget.held} of ${ctx.decodeBudget.heldBytesMax} bytes held by requests in flight); answered "bad load", its minion signs in again and resends it`);
}


function toFrame(reply: unknown): Buffer {
  return reply instanceof Framed ? reply.bytes : encodeWire(reply);
}

/** Limits for a frame over brine_clear_request_bytes_max: only a flat envelope (scalars, one big ciphertext) decodes. */
const bigEnvelopeLimits = { ...wireLimits, depthMax: bigEnvelopeDepthMax, elementsMax: bigEnvelopeElementsMax };
/** Limits for a frame between clearFrameBytesMax and that bound: a large CLI publish decodes, an element flood does not. */
const largeFrameLimits = { ...wireLimits, elementsMax: largeClearElementsMax };

/** The reply value for one request body: at once, or a promise of it when a handler waits. */
function handle(ctx: MasterContext, frame: Buffer, fx: Effects, source: string | undefined): unknown {
  cmdSlot = CMD_NONE;
  cmdLater = undefined;
  memo = undefined;
  overBudget = false;
  if (frame.length > frameBytesMax) {
    log.warning(`bad load received on socket: frame of ${frame.length} bytes exceeds frameBytesMax`);
    return { msg: BAD_LOAD };
  }
  // over brine_clear_request_bytes_max only an AES envelope is taken from the request port: decode the
  // envelope, never a container in it; between 64 KiB and that bound, a bounded number of elements (a large
  // CLI publish decodes, a flood of tiny elements stops early). A frame with a source was built by this
  // master's HTTP API from a bounded body.
  const big = frame.length > ctx.clearRequestBytesMax && source === undefined;
  const large = !big && frame.length > clearFrameBytesMax && source === undefined;
  let payload: WireValue;
  const frameLimits = big ? bigEnvelopeLimits : large ? largeFrameLimits : wireLimits;
  const frameUsed = budgeted(ctx, frame.length, frameLimits);
  tally.elements = 0;
  try {
    if (!frameUsed) throw new BrineError("MSGPACK_TOO_MANY", "decode budget");
    payload = decodeWire(frame, frameUsed, true, undefined, tally); // the frame is this request's own: byte values may be views into it
  } catch (e) {
    if (stoppedByBudget(e, frameUsed, frameLimits)) {
      // the string, as for an AES load that does not open: a minion signs in again and resends the request once
      overBudgetRefusal(ctx, "A request", frame.length);
      return BAD_LOAD;
    }
    const why = isBrineError(e) ? e.message : String(e);
    if (big) log.warning(`bad load received on socket: frame of ${frame.length} bytes over brine_clear_request_bytes_max (${ctx.clearRequestBytesMax}) is not a flat AES envelope (${why})`);
    else log.warning(`bad load received on socket: ${why}`);
    return { msg: BAD_LOAD };
  }
  if (!isMap(payload) || !("enc" in payload) || !("load" in payload)) {
    log.warning("bad load received on socket");
    return BAD_LOAD;
  }
  const version = typeof payload.version === "number" ? payload.version : 0;
  const enc = payload.enc;
  if (big && enc !== "aes") {
    log.warning(`bad load received on socket: ${short(enc)} request of ${frame.length} bytes exceeds brine_clear_request_bytes_max (${ctx.clearRequestBytesMax})`);
    return { msg: BAD_LOAD };
  }
  let load: WireValue = payload.load;
  let session: Crypticle | undefined;
  let cipher: Buffer | undefined;
  // the envelope's charge: its elements, and its bytes but an AES load's ciphertext (a view into the frame)
  ctx.decodeBudget.charge(tally.elements, enc === "aes" && Buffer.isBuffer(load) ? frame.length - load.length : frame.length);

  // where the load's entries lie in its plaintext (a return's event re-sends them as they came);
  // one holder per thread: filled by the decode below and read by the handler before it first waits
  const spans = enc === "aes" ? ctx.loadSpans : undefined;
  if (spans) spans.buf = undefined; // nothing of a previous request's plaintext is ever re-sent
  if (enc === "aes") {
    cipher = asBytes(load);
    if (!cipher) return BAD_LOAD;
    const opts = ctx.loadSpansOpts;
    const loadUsed = budgeted(ctx, cipher.length, wireLimits);
    if (!loadUsed) {
      overBudgetRefusal(ctx, `A request from ${short(payload.id)}`, cipher.length);
      return BAD_LOAD;
    }
    opts.limits = loadUsed;
    opts.tally = tally;
    tally.elements = 0;
    try {
      if (version > 2) {
        if (!validId(payload.id)) throw new BrineError("BAD_ID", "Encountered invalid id");
        const held = ctx.sessions.find(payload.id);
        if (!held) throw new BrineError("CRYPTICLE_AUTH", "no session key");
        session = held.crypticle;
        load = session.loads(cipher, opts);
      } else {
        load = ctx.aes().crypticle.loads(cipher, opts);
      }
      // the plaintext is at most the ciphertext's length: its strings are charged at that
      ctx.decodeBudget.charge(tally.elements, cipher.length);
    } catch (e) {
      if (stoppedByBudget(e, loadUsed, wireLimits)) {
        overBudgetRefusal(ctx, `A request from ${short(payload.id)}`, cipher.length);
        return BAD_LOAD;
      }
      if (version > 2 && isBrineError(e, "CRYPTICLE_AUTH") && ctx.sessionWaits && !(waitedFor & WAITED_SESSION_KEY)) {
        // clustered: the key may be on its way from the peer the minion signed in on (session-wait.ts)
        const id = payload.id as string;
        const sealed = cipher;
        const waiting = ctx.sessionWaits.wait(id, sealed.length, sessionKeyWaitMsMax, () => ctx.sessionOpens(id, sealed));
        if (typeof waiting !== "string") return waitForKey(ctx, waiting, WAITED_SESSION_KEY, frame, fx, source, id);
        keyWaitLog.line(`A request from ${short(id)} is sealed with a session key this master does not hold; answered "bad load" without waiting for a peer's (too many requests wait: ${waiting})`);
        return BAD_LOAD;
      }
      if (isBrineError(e, "CRYPTICLE_AUTH")) {
        log.debug("Minion failed to auth to master (AES key mismatch); it will re-authenticate");
      } else log.error(`Bad load from minion: ${isBrineError(e) ? e.message : String(e)}`);
      return BAD_LOAD;
    }
  } else if (enc !== "clear") {
    log.warning(`bad load received on socket: enc ${short(enc)}`);
    return BAD_LOAD;
  }

  if (!isMap(load)) {
    log.error(`payload and load must be a dict. Load was ${short(load)}`);
    return "payload and load must be a dict";
  }
  cmdSlot = cmdSlotOf(load.cmd);
  const id = load.id ?? "";
  if (typeof id !== "string") {
    log.error("Payload contains non-string id");
    return `bad load: id ${short(id)} is not a string`;
  }
  if (id.includes("\0")) {
    log.error("Payload contains an id with a null byte");
    return "bad load: id contains a null byte";
  }

  if (enc === "clear") {
    const cmd = load.cmd;
    if (typeof cmd !== "string" || !CLEAR_FUNCS.has(cmd)) {
      log.warning(`Clear request with command ${short(cmd)} refused (not an allowed clear command)`);
      return {};
    }
    // only a command that carries arguments may be large: a sign-in or a token call is a few KiB
    if (large && !LARGE_CLEAR_COMMANDS.has(cmd)) {
      log.warning(`bad load received on socket: clear ${short(cmd)} request of ${frame.length} bytes exceeds clearFrameBytesMax (${clearFrameBytesMax})`);
      return { msg: BAD_LOAD };
    }
    if (cmd === "_auth") return handleAuth(ctx, load, version, fx);
    if (cmd === "publish") return handlePublish(ctx, load, fx, source);
    return handleClearCommand(ctx, cmd, load, fx, source);
  }

  // AES requests
  // nonce and tok stay in the load object (deleting keys would turn it into a slow dictionary-mode
  // object on the hot path); handlers that pass the load on drop them when they copy it.
  let nonce: string | undefined;
  if (version > 1) {
    const n = load.nonce;
    if (n !== undefined && (typeof n !== "string" || !/^[0-9a-f]{32}$/.test(n))) {
      log.warning(`Request from ${id} with a malformed nonce`);
      return BAD_LOAD;
    }
    nonce = n;
  }
  if (version > 2) {
    const stale = staleTs(load.ts, ctx.now(), ctx.cfg.request_server_ttl, requestTsWindowS(ctx.cfg));
    if (stale !== undefined) {
      log.warning(`Received request from ${short(id)} with ${stale}`);
      return BAD_LOAD;
    }
    if (payload.id !== id) {
      log.warning(`Request id mismatch. Found '${short(id)}' but expected '${short(payload.id)}'`);
      return BAD_LOAD;
    }
    if (!validId(id)) {
      log.warning(`Request contains invalid minion id '${short(id)}'`);
      return BAD_LOAD;
    }
    const waiting = waitForAcceptedKey(ctx, id, frame, fx, source);
    if (waiting) return waiting;
    if (!checkTok(ctx, id, load.tok)) return BAD_LOAD;
  } else {
    // a v2 envelope has no per-minion key: refuse it where a v3 minion's name is claimed, or everywhere
    const minVersion = minionPolicy(ctx.cfg).minEnvelopeVersion;
    if (version < minVersion) {
      log.warning(`Request from ${id} refused: envelope version ${version} is below brine_min_envelope_version (${minVersion})`);
      return BAD_LOAD;
    }
    if (id !== "" && ctx.v3Marks.has(id)) {
      log.warning(`Request from ${id} refused: envelope version ${version}, but ${id} signs in with protocol v3 (another minion may be using its name)`);
      return BAD_LOAD;
    }
    // a v2 load carries no tok for every command (3006.8's `_pillar` has none), but a private reply needs the key too
    if (id !== "") {
      const waiting = waitForAcceptedKey(ctx, id, frame, fx, source);
      if (waiting) return waiting;
    }
    if (load.tok !== undefined && id !== "" && !checkTok(ctx, id, load.tok)) return BAD_LOAD;
  }

  const cmd = load.cmd;
  const handler = typeof cmd === "string" && !cmd.startsWith("__") ? AES_FUNCS.get(cmd) : undefined;
  if (nonce !== undefined) {
    // the request as the reply memory knows it: its nonce and its sealed load's HMAC tag (verified by the decryption)
    const m: Memo = (memo = adoptMemo ?? { kind: MEMO_FRESH, key: "", what: "" });
    m.kind = MEMO_FRESH;
    m.key = nonce + cipher!.toString("hex", cipher!.length - 32, cipher!.length - 32 + resendTagBytes);
    if (!ctx.nonces.checkAndInsert(nonce)) {
      // a copy: the main thread answers it with the first's reply, or refuses it as a replay (nonce-replies.ts)
      m.kind = MEMO_COPY;
      m.what = `${short(cmd)} from ${id}`;
      return BAD_LOAD;
    }
    // clustered, a minion another master owns: its decider's word first (nonce-owner-client.ts), unless a
    // second copy of this command would change nothing (a read) or there is no handler to act on it
    const verdict = handler && commandNeedsDecider(cmd) ? ctx.nonceOwner?.ask(id, nonce) : undefined;
    if (verdict !== undefined) {
      const held = spans && snapshotSpans(spans); // the thread's spans belong to the next request once this one waits
      return verdict.then((v) => {
        if (frameAction(v) === "refuse") {
          // a copy of a request another master accepted: answered with that master's reply, or refused (req-pool.ts)
          log.warning(`A copy, not acted on: ${short(cmd)} from ${id} reused nonce ${nonce} (seen by the master that decides for ${id})`);
          m.kind = MEMO_COPY;
          m.what = `${short(cmd)} from ${id}`;
          return BAD_LOAD;
        }
        fx.nonces.push(nonce);
        return dispatch(ctx, handler, cmd, load, fx, held, version, session, id, nonce, payload);
      });
    }
    fx.nonces.push(nonce); // to the journal and the peers (replay-window.ts)
  }
  return dispatch(ctx, handler, cmd, load, fx, spans, version, session, id, nonce, payload);
}

/**
 * Isolated filesystems: a request of a minion accepted a moment ago on the master it signed in on, whose key is on
 * its way here by state-sync, waits for it (a promise of the reply); undefined when the key is here, nothing can be
 * on its way (a shared key directory), the request waited for it once already, or the room is full (logged).
 */
function waitForAcceptedKey(ctx: MasterContext, id: string, frame: Buffer, fx: Effects, source: string | undefined): Promise<unknown> | undefined {
  if (!ctx.isolatedFs || !ctx.sessionWaits || waitedFor & WAITED_ACCEPTED_KEY || ctx.acceptedKeys.get(id) !== undefined) return undefined;
  const waiting = ctx.sessionWaits.wait(id, frame.length, acceptedKeyWaitMsMax, () => ctx.acceptedKeys.getFresh(id) !== undefined);
  if (typeof waiting !== "string") return waitForKey(ctx, waiting, WAITED_ACCEPTED_KEY, frame, fx, source, id);
  keyWaitLog.line(`A request from ${short(id)}, whose key this master has not accepted, is answered "bad load" without waiting for the key from a peer (too many requests wait: ${waiting})`);
  return undefined;
}

/**
 * A request that waits for its minion's session key or accepted key (`what`): once it is here, the request is
 * handled anew (it does not wait for the same thing again), with the decode budget's charge of that handling given
 * back when its reply is ready; at the deadline it is answered "bad load" as before. The memo the worker took when
 * the request began to wait is the one filled in, however many waits it went through.
 */
function waitForKey(ctx: MasterContext, waiting: Promise<boolean>, what: number, frame: Buffer, fx: Effects, source: string | undefined, id: string): Promise<unknown> {
  const slot: Memo = adoptMemo ?? { kind: MEMO_NONE, key: "", what: "" };
  memo = slot;
  const cmd = (cmdLater = adoptCmd ?? { slot: CMD_NONE });
  const waited = waitedFor | what;
  return waiting.then((came) => {
    if (!came) {
      if (what === WAITED_SESSION_KEY) keyWaitLog.line(`A request from ${short(id)} is sealed with a session key this master does not hold, and no peer sent one that opens it within ${sessionKeyWaitMsMax} ms; answered "bad load" (the minion signs in again)`);
      else log.warning(`Salt minion claiming to be ${id} attempted to communicate with master, but key could not be read and verification was denied (no peer's state-sync brought it within ${acceptedKeyWaitMsMax} ms).`);
      return BAD_LOAD;
    }
    let reply: unknown;
    waitedFor = waited;
    adoptMemo = slot;
    adoptCmd = cmd;
    try {
      reply = handle(ctx, frame, fx, source);
      // undecoded still: it waits again, and that wait fills the same holder
      if (cmdSlot !== CMD_NONE) cmd.slot = cmdSlot;
    } catch (e) {
      ctx.decodeBudget.letGo();
      throw e;
    } finally {
      waitedFor = 0;
      adoptMemo = undefined;
      adoptCmd = undefined;
    }
    const held = ctx.decodeBudget.detach();
    if (!(reply instanceof Promise)) {
      ctx.decodeBudget.give(held);
      return reply;
    }
    return reply.finally(() => ctx.decodeBudget.give(held));
  });
}

/** A copy of the entry spans of the request being handled, for a handler that runs after the request waited. */
function snapshotSpans(s: MapEntrySpans): MapEntrySpans {
  return { buf: s.buf, keys: s.keys.slice(), starts: s.starts.slice(), ends: s.ends.slice() };
}

/** Runs an AES request's handler (its checks passed) and seals its reply. */
function dispatch(ctx: MasterContext, handler: AesHandler | undefined, cmd: WireValue | undefined, load: Record<string, WireValue>, fx: Effects, spans: MapEntrySpans | undefined, version: number, session: Crypticle | undefined, id: string, nonce: string | undefined, payload: Record<string, WireValue>): unknown {
  if (!handler) {
    log.warning(`AES request from ${id} with command ${short(cmd)} is not allowed`);
    return seal(ctx, { ret: {}, mode: "send" }, version, session, id, nonce, payload);
  }
  const r = handler(ctx, load, fx, spans);
  if (r instanceof Promise) return r.then((done) => seal(ctx, done, version, session, id, nonce, payload));
  return seal(ctx, r, version, session, id, nonce, payload);
}

/** An AES request's reply: encrypted with the key it came under (v3: session; else the publish key), or sent private. */
function seal(ctx: MasterContext, r: AesResult, version: number, session: Crypticle | undefined, id: string, nonce: string | undefined, payload: Record<string, WireValue>): unknown {
  if (r.mode === "send_private") {
    return encryptPrivate(ctx, r.ret, id, nonce, String(payload.enc_algo ?? DEFAULT_ENC_ALGO), String(payload.sig_algo ?? DEFAULT_SIG_ALGO));
  }
  const c = version > 2 ? session! : ctx.aes().crypticle;
  return new Framed(c.dumps(r.ret, nonce, true));
}
