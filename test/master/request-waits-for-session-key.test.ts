/**
 * A protocol v3 request sealed with a session key this master does not hold yet (src/workers/req-handler/session-wait.ts):
 *
 * - behind a balancer a minion signs in on one master and sends `_pillar` to another, and the key the sign-in made
 *   reaches that one with the peers' cache sync, possibly after the request: clustered, the request waits for the key
 *   and is answered with it, instead of "bad load" (which made the minion sign in again, and after a second "bad
 *   load" fail: test/cluster-e2e/migrate-to-isolated's "the master answered "bad load" again after re-authentication");
 * - decoding a request never creates or renews a key: a key made then cannot open that request, and clustered it
 *   superseded, as the newest, the key the peer was sending;
 * - a key that never comes: "bad load" at the wait's end, as before; bounds on the waiting requests.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import { newEffects, type MasterContext } from "../../src/workers/req-handler/context.js";
import { requestContext, type RequestContext } from "../helpers/request-context.js";
import { handleRequest, lastCmdLater, lastCmdSlot, lastMemo } from "../../src/workers/req-handler/request.js";
import { CMD_NONE, cmdSlotOf } from "../../src/shared/metrics/labels.js";
import { Crypticle, generateKeyString } from "../../src/shared/protocol/crypticle.js";
import { packSalt, sealSalt } from "../../src/lib/minion/wire.js";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";
import { busEventOf } from "../../src/shared/event-frame.js";
import { applyPeerSessionKey } from "../../src/lib/store/sessions.js";
import { MEMO_FRESH } from "../../src/shared/nonce-replies.js";
import {
  SessionKeyWaitRoom,
  SessionKeyWaits,
  sessionKeyWaitBytesMax,
  sessionKeyWaitersMax,
  sessionKeyWaitersPerMinionMax,
  sessionKeyWaitMsMax,
  acceptedKeyWaitMsMax,
} from "../../src/workers/req-handler/session-wait.js";
import { testKeys } from "../helpers/minions.js";

const MINION = "lb-1";
let rc: RequestContext;
let ctx: MasterContext;

before(async () => {
  rc = await requestContext("brine-sesswait-", MINION);
  ctx = rc.ctx;
});
after(() => rc.close());

/** A v3 `_minion_event` of the minion, sealed with `key`, and its nonce. */
function v3Event(key: string, tag: string, id = MINION, tok = rc.keys.tok): { f: Buffer; nonce: string } {
  const nonce = newNonce();
  const inner = { cmd: "_minion_event", id, tag, data: { t: tag }, nonce, ts: Math.floor(Date.now() / 1000), tok };
  return { f: packSalt({ enc: "aes", load: sealSalt(new Crypticle(key), inner), version: 3, id }), nonce };
}

const keyFile = (id = MINION) => path.join(ctx.sessions.dir, id);
const refused = (reply: Buffer) => decodeWire(reply) === "bad load";
/** A clustered master's waiting room on this context (what MasterContext makes when `cluster_id` is set). */
const clustered = () => ((ctx as { sessionWaits: unknown }).sessionWaits = new SessionKeyWaitRoom(new SessionKeyWaits(Date.now)));
const unclustered = () => ((ctx as { sessionWaits: unknown }).sessionWaits = undefined);

test("unclustered: a request sealed with a key the master does not hold is answered bad load at once, and creates no key", async () => {
  unclustered();
  assert.equal(rc.ctx.sessionWaits, undefined, "a master without cluster_id has no waiting room");
  const fx = newEffects();
  const reply = await handleRequest(ctx, v3Event(generateKeyString(), "nokey").f, fx);
  assert.ok(refused(reply));
  assert.equal(existsSync(keyFile()), false, "decoding a request made no session key");
  assert.deepEqual(fx.events, []);
});

test("clustered: a request that comes before its minion's key from the peer waits, and is answered with that key once it lands", async () => {
  clustered();
  const peerKey = generateKeyString();
  const fx = newEffects();
  const { f, nonce } = v3Event(peerKey, "before-the-key");
  const reply = handleRequest(ctx, f, fx);
  const memo = lastMemo();
  assert.ok(memo, "the waiting request has its memo slot from the start");
  assert.equal(lastCmdSlot(), CMD_NONE, "its command cannot be read yet");
  const cmd = lastCmdLater();
  assert.ok(cmd, "the holder of its metrics cmd slot, for the worker to read when it is answered");
  await new Promise((r) => setTimeout(r, 120));
  assert.deepEqual(fx.events, [], "nothing acted on while the key is missing");
  assert.equal(existsSync(keyFile()), false, "the request made no key of its own meanwhile");
  // the peer's cache sync lands (the mirror thread's write)
  assert.equal(applyPeerSessionKey(ctx.sessions.dir, MINION, { key: peerKey, t: Date.now() }, 86_400_000, Date.now()), true);
  const r = await reply;
  assert.equal(refused(r), false, "answered, not bad load");
  const opened = new Crypticle(peerKey).loads(decodeWire(r) as Buffer, { nonce });
  // loads() checked the HMAC under the peer's key and the reply's nonce (it throws otherwise); _minion_event answers None
  assert.equal(opened, null, "the reply opens with the peer's key and answers the request's nonce");
  assert.deepEqual(fx.events.map((e) => busEventOf(e)?.tag), ["before-the-key"]);
  assert.deepEqual(fx.nonces, [nonce], "its nonce journaled once");
  assert.equal(memo!.kind, MEMO_FRESH, "the memo slot taken at the start holds the request's reply memory entry");
  assert.ok(memo!.key.startsWith(nonce));
  assert.equal(cmd!.slot, cmdSlotOf("_minion_event"), "counted under its command, not as undecodable");
  // a request with that key now opens at once
  const again = v3Event(peerKey, "after-the-key");
  assert.equal(refused(await handleRequest(ctx, again.f, newEffects())), false);
});

test("clustered: a key that never comes: bad load at the end of the wait, and still no key made by the request", async () => {
  clustered();
  const fx = newEffects();
  const started = Date.now();
  const reply = await handleRequest(ctx, v3Event(generateKeyString(), "never", "lb-2").f, fx);
  assert.ok(refused(reply));
  assert.equal(existsSync(keyFile("lb-2")), false, "no key made by the request");
  assert.ok(Date.now() - started >= sessionKeyWaitMsMax - 50, "it waited for the peer's key before refusing");
  assert.deepEqual(fx.events, []);
  assert.equal(rc.ctx.sessionWaits!.core.size, 0, "nothing left waiting");
});

test("the waiting requests are bounded per thread (count and bytes) and per minion; each leaves opened or at its deadline", () => {
  let now = 1_000;
  const open = new Set<string>();
  const w = new SessionKeyWaits(() => now);
  const results: [string, boolean][] = [];
  const small = 64;
  const wait = (id: string, bytes: number, done: (o: boolean) => void) => w.wait(id, bytes, sessionKeyWaitMsMax, () => open.has(id), done);
  for (let i = 0; i < sessionKeyWaitersPerMinionMax; i++) assert.equal(wait("m-a", small, (o) => results.push(["m-a", o])), undefined);
  assert.equal(wait("m-a", small, () => undefined), "minion", "one minion's waiting requests are bounded");
  assert.equal(wait("m-big", sessionKeyWaitBytesMax, () => undefined), "bytes", "so are their bytes");
  for (let i = w.size; i < sessionKeyWaitersMax; i++) assert.equal(wait(`m-${i}`, small, () => undefined), undefined);
  assert.equal(wait("m-late", small, () => undefined), "waiters", "and their number");
  assert.equal(w.tick(), true);
  assert.equal(results.length, 0, "nothing opened, nothing expired");
  open.add("m-a");
  assert.equal(w.tick(), true);
  assert.equal(results.length, sessionKeyWaitersPerMinionMax);
  assert.ok(results.every(([id, o]) => id === "m-a" && o), "m-a's requests leave opened");
  assert.equal(wait("m-a", small, (o) => results.push(["m-a2", o])), undefined, "room again for m-a");
  now += sessionKeyWaitMsMax;
  open.clear();
  assert.equal(w.tick(), false, "at the deadline every request leaves");
  assert.deepEqual(results.at(-1), ["m-a2", false]);
  assert.equal(w.size, 0);
});

test("isolated filesystems: a request (v3 or v2) of a minion accepted a moment ago on another master waits for its key, and is answered once state-sync brings it", async () => {
  clustered();
  const isolated = (on: boolean) => ((ctx as { isolatedFs: boolean }).isolatedFs = on);
  const newcomer = (await testKeys(2))[1]!;
  const sessionKey = generateKeyString();
  try {
    for (const id of ["iso-new", "shared-new"]) {
      assert.equal(applyPeerSessionKey(ctx.sessions.dir, id, { key: sessionKey, t: Date.now() }, 86_400_000, Date.now()), true);
    }
    // shared filesystem: the key directory is the cluster's own, nothing is on its way: refused at once
    isolated(false);
    const at = Date.now();
    assert.ok(refused(await handleRequest(ctx, v3Event(sessionKey, "shared", "shared-new", newcomer.tok).f, newEffects())));
    assert.ok(Date.now() - at < acceptedKeyWaitMsMax, "not held for the accepted key");
    isolated(true);
    const fx = newEffects();
    const { f, nonce } = v3Event(sessionKey, "accepted-elsewhere", "iso-new", newcomer.tok);
    const reply = handleRequest(ctx, f, fx);
    await new Promise((r) => setTimeout(r, 150));
    assert.deepEqual(fx.events, [], "nothing acted on before the key is accepted here");
    ctx.keys.write("accepted", "iso-new", newcomer.publicPem); // what state-sync's key channel installs
    const r = await reply;
    assert.equal(refused(r), false, "answered once the key came");
    assert.equal(new Crypticle(sessionKey).loads(decodeWire(r) as Buffer, { nonce }), null);
    assert.deepEqual(fx.events.map((e) => busEventOf(e)?.tag), ["accepted-elsewhere"]);

    // a 3006.8 minion (protocol v2: the master's AES key; no tok, as its `_pillar` has none) waits the same way
    const fx2 = newEffects();
    const nonce2 = newNonce();
    const v2 = packSalt({ enc: "aes", load: sealSalt(new Crypticle(rc.aesKey), { cmd: "_minion_event", id: "iso-v2", tag: "v2-accepted-elsewhere", data: {}, nonce: nonce2 }), version: 2 });
    const reply2 = handleRequest(ctx, v2, fx2);
    await new Promise((r) => setTimeout(r, 150));
    assert.deepEqual(fx2.events, [], "the v2 request waits too");
    ctx.keys.write("accepted", "iso-v2", newcomer.publicPem);
    const r2 = await reply2;
    assert.equal(refused(r2), false, "the v2 request answered once the key came");
    assert.equal(new Crypticle(rc.aesKey).loads(decodeWire(r2) as Buffer, { nonce: nonce2 }), null);
    assert.deepEqual(fx2.events.map((e) => busEventOf(e)?.tag), ["v2-accepted-elsewhere"]);
  } finally {
    isolated(false);
  }
});
