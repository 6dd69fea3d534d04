/**
 * The request lanes: frames are classified without decoding (clear → clear lane, everything else →
 * request lane); each lane is bounded, and a full lane answers at once with a clear error instead of
 * queueing without limit — while the other lane keeps serving (a return flood cannot starve sign-ins).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { classify, QUEUE_FULL_REPLY, STALE_REPLY } from "../../src/main-thread/req-pool.js";
import { decodeWire, encodeWire, isMap } from "../../src/shared/protocol/msgpack.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { startTestMaster } from "../helpers/master.js";
import { scrapeMetrics } from "../helpers/metrics.js";
import { testKeys } from "../helpers/minions.js";
import { cleanKey } from "../../src/shared/protocol/pem.js";


/**
 * A burst the test controls: a first wave of n sign-ins that holds the clear lane's one worker busy with RSA work,
 * and a second wave of n sent while it is, so the second wave's sign-ins wait longer than 1 ms before their batch
 * starts. Every client is connected first (an undecodable frame, answered on the request lane). The replies, in order.
 */
/**
 * Connects every client before a burst: one undecodable frame each (answered "bad load" on the request lane), `group`
 * clients at a time (under a small lane's places: a refused frame is never answered).
 */
async function connectAll(clients: RawClient[], group = clients.length): Promise<void> {
  for (let i = 0; i < clients.length; i += group) {
    for (const r of await Promise.all(clients.slice(i, i + group).map((c) => c.request(Buffer.from("warm-up"))))) assert.deepEqual(decodeWire(r), { msg: "bad load" });
  }
}

async function signInStorm(clients: RawClient[], keys: { pub: string }[], idPrefix: string): Promise<Buffer[]> {
  const n = clients.length / 2;
  await connectAll(clients);
  const signIn = (c: RawClient, i: number) =>
    c.request(encodeWire({ enc: "clear", load: { cmd: "_auth", id: `${idPrefix}-${i}`, nonce: randomUUID().replace(/-/g, ""), pub: cleanKey(keys[i % 2]!.pub) }, version: 3 }));
  const first = clients.slice(0, n).map((c, i) => signIn(c, i));
  const firstAnswer = Promise.race(first);
  await new Promise((r) => setTimeout(r, 2));
  const second = clients.slice(n).map((c, i) => signIn(c, n + i));
  await firstAnswer;
  return Promise.all([...first, ...second]);
}

test("clear envelopes go to the clear lane, AES and malformed ones to the request lane", () => {
  assert.equal(classify(encodeWire({ enc: "clear", load: { cmd: "_auth" }, version: 3 })), "clear");
  assert.equal(classify(encodeWire({ enc: "clear", load: { cmd: "publish" }, version: 3 })), "clear");
  assert.equal(classify(encodeWire({ enc: "aes", load: Buffer.alloc(64), version: 3, id: "m1" })), "req");
  assert.equal(classify(Buffer.from("garbage")), "req");
});

test("a full request lane leaves a refused AES request unanswered (a Salt minion cannot read a map there; silence makes it send again after its timeout), and sign-ins are still served", async () => {
  const tm = await startTestMaster({ auto_accept: true, worker_threads: 1, brine_queue_len_max: 8, brine_metrics: { port: 0 } });
  const [k] = await testKeys(1);
  // a RawClient has one request in flight at a time: 160 clients, one frame each, all at once
  const clients = Array.from({ length: 160 }, () => new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 120_000 }));
  try {
    // every client connected first, in groups under the lane's 8 places (a refused frame is never answered): a client
    // still connecting when the flood starts sends its frame late, and on a loaded box the frames trickled in one by
    // one and never filled the lane (CI once: "some frames found the lane full" failed)
    await connectAll(clients, 4);
    const handledBefore = (await scrapeMetrics(tm)).get('salt_master_requests_handled_total{cmd="none"}') ?? 0;
    // far more frames in flight than the request lane's 8 places, all sent at once
    const flood = encodeWire({ enc: "aes", load: Buffer.alloc(4096, 1), version: 2 });
    const replies: (Buffer | undefined)[] = new Array(160);
    clients.forEach((c, i) => void c.request(flood).then((r) => (replies[i] = r), () => undefined));
    const auth = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 60_000 });
    const authReply = auth.clear({ cmd: "_auth", id: "lane-m1", nonce: randomUUID().replace(/-/g, ""), pub: cleanKey(k!.pub) });
    // every frame is either worked on ("bad load": it cannot be decrypted) or refused and counted
    let refused = 0;
    const answered = () => replies.filter((r) => r !== undefined).length;
    for (const deadline = Date.now() + 60_000; ; ) {
      refused = (await scrapeMetrics(tm)).get('brine_request_lane_refused_total{lane="req",reason="queue_full"}') ?? 0;
      if (refused + answered() === 160 || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(refused > 0, "some frames found the lane full");
    assert.equal(refused + answered(), 160, "each frame worked on or refused, once");
    // a refused frame's reply never comes (before: QUEUE_FULL_REPLY, a map, at once)
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(answered(), 160 - refused, "no refused AES request was answered");
    assert.ok(replies.every((r) => r === undefined || decodeWire(r) === "bad load"), "the answered ones were worked on");
    assert.equal((await scrapeMetrics(tm)).get('salt_master_requests_handled_total{cmd="none"}'), handledBefore + 160 - refused);
    // a clear request (a sign-in, a CLI call) refused by a full lane still gets this reply
    assert.deepEqual(decodeWire(QUEUE_FULL_REPLY), { error: "request queue is full, retry later" });
    const a = await authReply;
    assert.ok(isMap(a) && Buffer.isBuffer(a.load) && Buffer.isBuffer(a.sig), "the sign-in got a signed reply");
    const inner = decodeWire(a.load as Buffer);
    assert.ok(isMap(inner) && inner.enc === "pub", "accepted");
    auth.close();
  } finally {
    for (const c of clients) c.close();
    await tm.stop();
  }
});

test("sign-ins that waited past brine_auth_stale_ms are answered retry-later without RSA work", async () => {
  const tm = await startTestMaster({ auto_accept: true, worker_threads: 1, brine_auth_stale_ms: 1, brine_metrics: { port: 0 } });
  const keys = await testKeys(2);
  const n = 40;
  const clients = Array.from({ length: 2 * n }, () => new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 60_000 }));
  try {
    const replies = await signInStorm(clients, keys, "stale");
    const stale = replies.filter((r) => r.equals(STALE_REPLY)).length;
    const signed = replies.filter((r) => {
      const v = decodeWire(r);
      return isMap(v) && Buffer.isBuffer(v.sig);
    }).length;
    assert.equal(stale + signed, 2 * n, "each sign-in got one reply: signed, or retry-later");
    assert.ok(stale > 0, "a 1 ms budget leaves the sign-ins that queued behind a busy lane stale");
    // each one counted on the clear lane (metrics); a stale sign-in is refused by its lane, never handled
    const m = await scrapeMetrics(tm);
    assert.equal(m.get('brine_request_lane_refused_total{lane="clear",reason="stale"}'), stale);
    assert.equal(m.get('salt_master_requests_handled_total{cmd="_auth"}'), signed);
    assert.deepEqual(decodeWire(STALE_REPLY), { error: "request waited too long in the queue, retry later" });
  } finally {
    for (const c of clients) c.close();
    await tm.stop();
  }
});

test("a sign-in storm's stale batches are logged once per 10 s with a count of the rest, not a line each", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-stale-log-"));
  const logFile = path.join(dir, "master.log");
  const tm = await startTestMaster({ auto_accept: true, worker_threads: 1, brine_auth_stale_ms: 1 }, undefined, { logFile });
  const keys = await testKeys(2);
  const n = 40;
  try {
    // three storms in a row, each leaving stale sign-ins behind a busy lane: three or more stale batches
    let staleTotal = 0;
    for (let wave = 0; wave < 3; wave++) {
      const clients = Array.from({ length: 2 * n }, () => new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 60_000 }));
      try {
        const replies = await signInStorm(clients, keys, `storm-${wave}`);
        const stale = replies.filter((r) => r.equals(STALE_REPLY)).length;
        assert.ok(stale > 0, `wave ${wave} left stale sign-ins`);
        staleTotal += stale;
      } finally {
        for (const c of clients) c.close();
      }
    }
    const lines = readFileSync(logFile, "utf8").split("\n").filter((l) => l.includes("waited over 1 ms; answered retry-later"));
    assert.equal(lines.length, 1, `one line within the 10 s budget for ${staleTotal} stale sign-ins over three storms, got:\n${lines.join("\n")}`);
  } finally {
    await tm.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
