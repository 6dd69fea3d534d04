/**
 * The request path while a request waits for its minion's nonce decider (clustered, a minion another master
 * owns: src/workers/req-handler/nonce-owner-client.ts), in process with a decider played by the test:
 *
 * - "seen": the frame is refused ("bad load"), nothing is fired or stored, its nonce is not journaled;
 * - "fresh" and "undecided": it is acted on once the verdict comes, its nonce journaled;
 * - two returns that wait at once, answered in the other order, each fire their own return event: the entry
 *   spans of a waiting request are its own, not those of the request decoded after it (the thread's spans
 *   holder is refilled by every decode).
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { newEffects, type Effects, type MasterContext } from "../../src/workers/req-handler/context.js";
import { requestContext, type RequestContext } from "../helpers/request-context.js";
import { handleRequest } from "../../src/workers/req-handler/request.js";
import { Crypticle } from "../../src/shared/protocol/crypticle.js";
import { packSalt, sealSalt } from "../../src/lib/minion/wire.js";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";
import { busEventOf } from "../../src/shared/event-frame.js";
import { NONCE_FRESH, NONCE_SEEN, NONCE_UNDECIDED } from "../../src/shared/nonce-owner.js";

let rc: RequestContext;
let ctx: MasterContext;
let aesKey: string;
/** the asks the test's decider holds: each resolves when the test says */
const held: { nonce: string; answer: (v: number) => void }[] = [];

before(async () => {
  rc = await requestContext("brine-decider-", "far-1");
  ({ ctx, aesKey } = rc);
  // this master does not own far-1: every request of it waits for the test's verdict
  (ctx as { nonceOwner: unknown }).nonceOwner = { ask: (_id: string, nonce: string) => new Promise<number>((answer) => held.push({ nonce, answer })) };
});
after(() => rc.close());

/** A v2 request of far-1 (a 3006.8 minion's envelope), and its nonce. */
function frame(load: Record<string, unknown>): { f: Buffer; nonce: string } {
  const nonce = newNonce();
  return { f: packSalt({ enc: "aes", load: sealSalt(new Crypticle(aesKey), { id: "far-1", ...load, nonce }), version: 2 }), nonce };
}

const returned = (jid: string, value: string) => frame({ cmd: "_return", jid, fun: "test.echo", fun_args: [value], return: value, retcode: 0, success: true });
const refused = (reply: Buffer) => decodeWire(reply) === "bad load";
const tags = (fx: Effects) => fx.events.map((e) => busEventOf(e)?.tag);

test("a request waiting for its decider: seen is refused with nothing fired; fresh and undecided are acted on", async () => {
  for (const [verdict, acted] of [
    [NONCE_SEEN, false],
    [NONCE_FRESH, true],
    [NONCE_UNDECIDED, true],
  ] as const) {
    const fx = newEffects();
    const { f, nonce } = frame({ cmd: "_minion_event", tag: `decider/${verdict}`, data: { v: verdict } });
    const reply = handleRequest(ctx, f, fx);
    await new Promise((r) => setImmediate(r));
    assert.equal(held.length, 1, "the request asked once and waits");
    assert.equal(held[0]!.nonce, nonce);
    assert.deepEqual(fx.events, [], "nothing fired before the verdict");
    held.shift()!.answer(verdict);
    const r = await reply;
    assert.equal(refused(r), !acted, `verdict ${verdict}`);
    assert.deepEqual(tags(fx), acted ? [`decider/${verdict}`] : []);
    assert.deepEqual(fx.nonces, acted ? [nonce] : [], "only an acted-on request's nonce is journaled and forwarded");
    assert.equal(ctx.nonces.checkAndInsert(nonce), false, "the nonce is in this master's set either way");
  }
});

test("two returns waiting at once, answered in the other order, each fire their own return event", async () => {
  const fx = newEffects();
  const a = returned("20261126000000000001", "first");
  const b = returned("20261126000000000002", "second");
  const ra = handleRequest(ctx, a.f, fx);
  const rb = handleRequest(ctx, b.f, fx);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(held.map((h) => h.nonce), [a.nonce, b.nonce]);
  const [ha, hb] = [held.shift()!, held.shift()!];
  hb.answer(NONCE_FRESH);
  assert.equal(refused(await rb), false);
  ha.answer(NONCE_FRESH);
  assert.equal(refused(await ra), false);
  const events = fx.events.map((e) => busEventOf(e)!);
  assert.deepEqual(
    events.map((e) => [e.tag, e.data.return, e.data.jid]),
    [
      ["salt/job/20261126000000000002/ret/far-1", "second", "20261126000000000002"],
      ["salt/job/20261126000000000001/ret/far-1", "first", "20261126000000000001"],
    ],
  );
});

test("a read (a fileserver request, mine.get) does not wait for its decider; a pillar render and a mine write do", async () => {
  for (const [cmd, load, asks] of [
    ["_file_envs", {}, false],
    ["_file_list", { saltenv: "base", prefix: "" }, false],
    ["_mine_get", { tgt: "*", fun: "test.ping" }, false],
    ["_pillar", { grains: {}, saltenv: null, pillarenv: null, pillar_override: {}, extra_minion_data: {}, ver: "2" }, true],
    ["_mine", { data: { "test.ping": true } }, true],
  ] as const) {
    const fx = newEffects();
    const { f, nonce } = frame({ cmd, ...load });
    const reply = handleRequest(ctx, f, fx);
    await new Promise((r) => setImmediate(r));
    assert.equal(held.length, asks ? 1 : 0, `${cmd} ${asks ? "asks" : "does not ask"} its decider`);
    if (asks) held.shift()!.answer(NONCE_FRESH);
    assert.equal(refused(await reply), false, cmd);
    assert.equal(ctx.nonces.checkAndInsert(nonce), false, `${cmd}: its nonce is in this master's own set all the same`);
  }
});
