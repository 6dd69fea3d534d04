/**
 * The request path under a request thread's decode budget (src/workers/req-handler/decode-budget.ts), in process
 * with a budget of a few requests and a nonce decider played by the test (a request that waits for its verdict keeps
 * its decoded load, as a minion-initiated return keeps it across its job load's commit):
 *
 * - requests that wait hold their charge; one that would pass the budget is answered "bad load" and nothing of it
 *   is acted on (its nonce not taken), whether its bytes alone pass what is left or its elements run past it;
 * - once the waiting requests are answered their charge is free and the same request is taken;
 * - a return stored without a wait lets go of its charge at its put, before its write is durable.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { newEffects, type MasterContext } from "../../src/workers/req-handler/context.js";
import { requestContext, type RequestContext } from "../helpers/request-context.js";
import { handleRequest, lastOverBudget } from "../../src/workers/req-handler/request.js";
import { DecodeBudget, decodedElementHeapBytesMax } from "../../src/workers/req-handler/decode-budget.js";
import { Crypticle } from "../../src/shared/protocol/crypticle.js";
import { packSalt, sealSalt } from "../../src/lib/minion/wire.js";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import { formatJid } from "../../src/shared/protocol/jid.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";
import { NONCE_FRESH } from "../../src/shared/nonce-owner.js";

/** elements in each test request's data */
const ELEMENTS = 10_000;
/** the budget: room for two such requests and a half */
const BUDGET = Math.floor(2.5 * ELEMENTS * decodedElementHeapBytesMax);

let rc: RequestContext;
let ctx: MasterContext;
let aesKey: string;
const held: { answer: (v: number) => void }[] = [];

before(async () => {
  rc = await requestContext("brine-budget-", "heavy-1");
  ({ ctx, aesKey } = rc);
  (ctx as { decodeBudget: DecodeBudget }).decodeBudget = new DecodeBudget(BUDGET);
});
after(() => rc.close());

/** A v2 request of heavy-1 (a 3006.8 minion's envelope) carrying `data`, and its nonce. */
function frame(load: Record<string, unknown>): { f: Buffer; nonce: string } {
  const nonce = newNonce();
  return { f: packSalt({ enc: "aes", load: sealSalt(new Crypticle(aesKey), { id: "heavy-1", ...load, nonce }), version: 2 }), nonce };
}
/** an event whose data is `n` empty maps (a request that waits for its decider: its load is kept) */
const event = (n: number) => frame({ cmd: "_minion_event", tag: "heavy/event", data: { list: new Array(n).fill({}) } });
const refused = (reply: Buffer) => decodeWire(reply) === "bad load";
/** the decider asks the test; `wait` false: it answers at once (fresh) */
function decider(wait: boolean): void {
  (ctx as { nonceOwner: unknown }).nonceOwner = wait ? { ask: () => new Promise<number>((answer) => held.push({ answer })) } : undefined;
}

test("requests that wait hold their charge; the one that would pass the budget is answered bad load and not acted on; once they are answered it is taken", async () => {
  decider(true);
  const fx = newEffects();
  const waiting = [event(ELEMENTS), event(ELEMENTS)].map(({ f }) => {
    const r = handleRequest(ctx, f, fx);
    assert.equal(lastOverBudget(), false);
    return r;
  });
  const after2 = ctx.decodeBudget.held;
  assert.ok(after2 > 2 * ELEMENTS * decodedElementHeapBytesMax && after2 < BUDGET, `${after2} bytes held by the two`);
  // its elements run past what is left: stopped, refused, nothing charged, its nonce not taken
  const third = event(ELEMENTS);
  const r3 = await handleRequest(ctx, third.f, fx);
  assert.equal(lastOverBudget(), true);
  assert.ok(refused(r3), "answered bad load");
  assert.equal(ctx.decodeBudget.held, after2, "nothing of the refused one is held");
  assert.equal(ctx.nonces.checkAndInsert(third.nonce), true, "its nonce was never taken: its resend is not a replay");
  // a tiny request still fits what is left
  const small = handleRequest(ctx, event(1).f, fx);
  assert.equal(lastOverBudget(), false);
  await new Promise((r) => setImmediate(r));
  assert.equal(held.length, 3, "the two and the small one wait for their decider");
  for (const h of held.splice(0)) h.answer(NONCE_FRESH);
  for (const r of [...waiting, small]) assert.equal(refused(await r), false);
  assert.equal(ctx.decodeBudget.held, 0, "answered: their charge is free");
  const again = handleRequest(ctx, event(ELEMENTS).f, fx);
  assert.equal(lastOverBudget(), false, "the same request is taken now");
  await new Promise((r) => setImmediate(r));
  held.shift()!.answer(NONCE_FRESH);
  assert.equal(refused(await again), false);
});

test("a request whose bytes alone pass what is left of the budget is refused before it is decrypted", async () => {
  decider(true);
  const fx = newEffects();
  const a = handleRequest(ctx, event(ELEMENTS).f, fx);
  const b = handleRequest(ctx, event(ELEMENTS).f, fx);
  const left = BUDGET - ctx.decodeBudget.held;
  // a string as long as what is left: no element count could make it fit
  const r = await handleRequest(ctx, frame({ cmd: "_minion_event", tag: "heavy/text", data: { text: "x".repeat(left) } }).f, fx);
  assert.equal(lastOverBudget(), true);
  assert.ok(refused(r));
  await new Promise((r) => setImmediate(r));
  for (const h of held.splice(0)) h.answer(NONCE_FRESH);
  await Promise.all([a, b]);
  assert.equal(ctx.decodeBudget.held, 0);
});

test("a return stored without a wait lets go of its charge at its put, before its write is durable", async () => {
  decider(false);
  const fx = newEffects();
  const jid = formatJid(Date.now() - 1000, 0);
  const ret = handleRequest(ctx, frame({ cmd: "_return", jid, fun: "test.arg", fun_args: [], return: new Array(ELEMENTS).fill({}), retcode: 0, success: true }).f, fx);
  assert.equal(lastOverBudget(), false);
  assert.equal(ctx.decodeBudget.held, 0, "nothing held while the return's write becomes durable");
  assert.equal(refused(await ret), false);
  assert.ok(ctx.jobs.hasReturn(jid, "heavy-1"), "stored");
});
