/**
 * A sign-in sent again with the same bytes (Salt resends one payload up to auth_tries times) is answered at once
 * with the reply its first copy got, not worked on again (src/main-thread/sign-in-replies.ts); only signed replies
 * are remembered, for 10 s and under one AES key generation; other requests are never looked up.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { encodeWire } from "../../src/shared/protocol/msgpack.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { cleanKey } from "../../src/shared/protocol/pem.js";
import { SignInReplies, signInReplyRememberMs } from "../../src/main-thread/sign-in-replies.js";
import { QUEUE_FULL_REPLY, STALE_REPLY } from "../../src/main-thread/req-pool.js";
import { clearSignedFrame } from "../../src/workers/req-handler/auth.js";
import { startTestMaster } from "../helpers/master.js";
import { scrapeMetrics } from "../helpers/metrics.js";
import { testKeys } from "../helpers/minions.js";

const signInBytes = (id: string, nonce = randomUUID().replace(/-/g, "")) => encodeWire({ enc: "clear", load: { cmd: "_auth", id, nonce, pub: "PEM" }, version: 3 });
const signed = (text: string) => clearSignedFrame(Buffer.from(text), Buffer.from("sig"));

test("the sign-in memory: same bytes recalled, signed replies only, forgotten after 10 s or at an AES rotation", () => {
  let now = 1_000_000;
  const mem = new SignInReplies(() => now);
  assert.equal(mem.keyOf(encodeWire({ enc: "clear", load: { cmd: "publish", fun: "test.ping" } })), undefined, "not a sign-in: never looked up");
  const a = signInBytes("m1", "n1");
  const k = mem.keyOf(a)!;
  assert.ok(k);
  assert.equal(mem.keyOf(signInBytes("m1", "n2")) === k, false, "another nonce is another sign-in");
  assert.equal(mem.keyOf(Buffer.from(a)), k, "the same bytes are the same sign-in");
  mem.remember(k, STALE_REPLY, 1);
  mem.remember(k, QUEUE_FULL_REPLY, 1);
  assert.equal(mem.recall(k, 1), undefined, "retry-later answers are not remembered");
  const reply = signed("accepted");
  mem.remember(k, reply, 1);
  assert.deepEqual(mem.recall(k, 1), reply);
  assert.equal(mem.recall(k, 2), undefined, "an AES rotation forgets it");
  mem.remember(k, reply, 2);
  now += signInReplyRememberMs + 1;
  assert.equal(mem.recall(k, 2), undefined, "forgotten after 10 s");
  assert.equal(mem.size, 0);
});

test("the sign-in memory forgets replies past their time when swept, with no later sign-in", () => {
  let now = 1_000_000;
  const mem = new SignInReplies(() => now);
  const keys = ["a", "b", "c"].map((x) => mem.keyOf(signInBytes(x))!);
  mem.remember(keys[0]!, signed("a"), 1);
  now += 4_000;
  mem.remember(keys[1]!, signed("b"), 1);
  mem.remember(keys[2]!, signed("c"), 1);
  assert.equal(mem.expire(), 0, "nothing past its time yet");
  now += signInReplyRememberMs - 4_000 + 1;
  assert.equal(mem.expire(), 1, "the first one is past its time");
  assert.equal(mem.size, 2);
  now += 4_000;
  assert.equal(mem.expire(), 2);
  assert.equal(mem.size, 0, "a storm's replies do not stay until the next sign-in");
});

test("the sign-in memory is bounded in bytes, the oldest forgotten first", () => {
  const mem = new SignInReplies(() => 0, 10_000, 3 * 1000);
  const keys = ["a", "b", "c", "d"].map((x) => mem.keyOf(signInBytes(x))!);
  for (const k of keys) mem.remember(k, signed("x".repeat(950)), 1);
  assert.equal(mem.size, 3);
  assert.equal(mem.recall(keys[0]!, 1), undefined, "the oldest went");
  assert.ok(mem.recall(keys[3]!, 1));
});

test("a master answers a resent sign-in with its first reply, without working on it again", async () => {
  const tm = await startTestMaster({ auto_accept: true, brine_metrics: { port: 0 } });
  const [k] = await testKeys(1);
  const a = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 30_000 });
  const b = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 30_000 });
  try {
    const bytes = encodeWire({ enc: "clear", load: { cmd: "_auth", id: "resent-1", nonce: randomUUID().replace(/-/g, ""), pub: cleanKey(k!.pub) }, version: 3 });
    const first = await a.request(bytes);
    // the minion's next try: the same payload on a new connection (3007.x)
    const again = await b.request(bytes);
    assert.deepEqual(again, first, "the same reply bytes");
    // a new sign-in (new nonce) is worked on
    await b.request(encodeWire({ enc: "clear", load: { cmd: "_auth", id: "resent-1", nonce: randomUUID().replace(/-/g, ""), pub: cleanKey(k!.pub) }, version: 3 }));
    let m = await scrapeMetrics(tm);
    for (let i = 0; i < 30 && m.get("brine_sign_ins_resent_total") !== 1; i++) {
      await new Promise((r) => setTimeout(r, 100)); // the main thread writes its figures once a second
      m = await scrapeMetrics(tm);
    }
    assert.equal(m.get("brine_sign_ins_resent_total"), 1, "one answered from memory");
    assert.equal(m.get('salt_master_requests_handled_total{cmd="_auth"}'), 2, "two worked on");
  } finally {
    a.close();
    b.close();
    await tm.stop();
  }
});
