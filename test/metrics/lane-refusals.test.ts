/**
 * Request lane refusals on the metrics endpoint: every "queue full" and every stale sign-in a lane answered
 * without work is counted, exactly, by lane and reason; a frame whose command could not be read counts under
 * cmd "none".
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { QUEUE_FULL_REPLY, STALE_REPLY } from "../../src/workers/req-handler/pool.js";
import { decodeWire, encodeWire } from "../../src/protocol/msgpack.js";
import { RawClient } from "../../src/minion/raw-client.js";
import { cleanKey } from "../../src/protocol/pem.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { testKeys } from "../helpers/minions.js";

/** A series' value; one not printed is 0 (the requests family lists only commands seen). */
async function series(tm: TestMaster, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${tm.server.metricsPort}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.slice(name.length + 1));
}

test("each 'queue full' reply is counted on its lane, each undecodable frame under cmd none", { timeout: 120_000 }, async () => {
  const tm = await startTestMaster({ worker_threads: 1, brine_queue_len_max: 8, brine_metrics: { port: 0 } });
  const clients = Array.from({ length: 120 }, () => new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 60_000 }));
  try {
    const flood = encodeWire({ enc: "aes", load: Buffer.alloc(4096, 1), version: 2 });
    const replies = await Promise.all(clients.map((c) => c.request(flood)));
    const full = replies.filter((r) => r.equals(QUEUE_FULL_REPLY)).length;
    const bad = replies.filter((r) => decodeWire(r) === "bad load").length;
    assert.ok(full > 0 && full + bad === 120);
    assert.equal(await series(tm, 'brine_request_lane_refused_total{lane="req",reason="queue_full"}'), full);
    assert.equal(await series(tm, 'brine_request_lane_refused_total{lane="auth",reason="queue_full"}'), 0);
    assert.equal(await series(tm, 'salt_master_requests_handled_total{cmd="none"}'), bad);
  } finally {
    for (const c of clients) c.close();
    await tm.stop();
  }
});

test("each stale sign-in answered retry-later is counted on the auth lane", { timeout: 120_000 }, async () => {
  const tm = await startTestMaster({ auto_accept: true, worker_threads: 1, brine_auth_stale_ms: 1, brine_metrics: { port: 0 } });
  const keys = await testKeys(2);
  const clients = Array.from({ length: 40 }, () => new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 60_000 }));
  try {
    const replies = await Promise.all(
      clients.map((c, i) => c.request(encodeWire({ enc: "clear", load: { cmd: "_auth", id: `stale-${i}`, nonce: randomUUID().replace(/-/g, ""), pub: cleanKey(keys[i % 2]!.pub) }, version: 3 }))),
    );
    const stale = replies.filter((r) => r.equals(STALE_REPLY)).length;
    assert.ok(stale > 0);
    assert.equal(await series(tm, 'brine_request_lane_refused_total{lane="auth",reason="stale"}'), stale);
    const answered = await series(tm, 'salt_master_requests_handled_total{cmd="_auth"}');
    assert.equal(answered, 40 - stale, "a stale sign-in is refused by its lane, not handled");
    // two keys for 40 ids: the first of each is accepted (auto_accept), later ids with a known key still sign in
    const results = ["accept", "pend", "reject", "denied", "full", "invalid"];
    let sum = 0;
    for (const r of results) sum += await series(tm, `salt_auth_attempts_total{result="${r}"}`);
    assert.equal(sum, answered, "every handled sign-in has one result");
  } finally {
    for (const c of clients) c.close();
    await tm.stop();
  }
});
