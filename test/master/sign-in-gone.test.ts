/**
 * A sign-in whose connection closed before its turn is not worked on (native transport, src/shared/conn-board.ts):
 * a 3007.x minion whose sign-in timed out closes that connection and sends the sign-in again on a new one, so in a
 * storm the RSA work for the old one would be for nobody. Sign-ins on live connections are all answered.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { decodeWire, encodeWire, isMap } from "../../src/shared/protocol/msgpack.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { cleanKey } from "../../src/shared/protocol/pem.js";
import { ConnBoard, connBoardSlots } from "../../src/shared/conn-board.js";
import { startTestMaster } from "../helpers/master.js";
import { scrapeMetrics } from "../helpers/metrics.js";
import { testKeys } from "../helpers/minions.js";
import * as zmq from "zeromq";
import { NativeRouter } from "../../src/main-thread/zmtp-server.js";
import { freePort } from "../../tools/free-port.js";

test("the conn board calls a connection gone only after its own close, never a live one that shares its slot", () => {
  const b = new ConnBoard();
  const id = 0xfffe_0005;
  assert.equal(b.gone(id), false, "unknown: not gone");
  b.opened(id);
  assert.equal(b.gone(id), false, "open");
  b.closed(id);
  assert.equal(b.gone(id), true, "closed");
  // a newer connection in the same slot: the older one is no longer known gone, the newer one is open
  const newer = (id + connBoardSlots) >>> 0;
  b.opened(newer);
  assert.equal(b.gone(newer), false);
  assert.equal(b.gone(id), false, "the older one's request would be worked on, as without the board");
  // the older one closing again (or late) never makes the newer live one read as gone
  b.closed(id);
  assert.equal(b.gone(newer), false);
  // the same board read through another view of its buffer (a worker's)
  const w = new ConnBoard(b.sab);
  b.closed(newer);
  assert.equal(w.gone(newer), true);
});

test("sign-ins whose connections closed while they waited are answered without work; live ones are all signed", async () => {
  // brine_auth_stale_ms an hour (its maximum; 0 would turn the gone check off with it): no sign-in here is answered
  // retry-later for its wait (lanes-bounded tests that); on a loaded box the lane's one thread took longer than the
  // default 4.5 s over the 192 live ones, and the last batch was answered unsigned (a CI run at load 30: 128 of 192)
  const tm = await startTestMaster({ auto_accept: true, worker_threads: 1, brine_metrics: { port: 0 }, brine_auth_stale_ms: 3_600_000 });
  const keys = await testKeys(2);
  const signIn = (id: string) => encodeWire({ enc: "clear", load: { cmd: "_auth", id, nonce: randomUUID().replace(/-/g, ""), pub: cleanKey(keys[id.length % 2]!.pub) }, version: 3 });
  const busyClients = 3;
  const perBusy = 64;
  const leaving = 20;
  const busy = Array.from({ length: busyClients }, () => new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 60_000 }));
  const gone = Array.from({ length: leaving }, () => new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 60_000 }));
  try {
    // every connection up first (an undecodable frame, answered on the request lane)
    for (const r of await Promise.all([...busy, ...gone].map((c) => c.request(Buffer.from("warm-up"))))) assert.deepEqual(decodeWire(r), { msg: "bad load" });
    // the clear lane's one thread busy with RSA work: three batches of sign-ins from live connections
    for (const [k, c] of busy.entries()) for (let i = 0; i < perBusy; i++) await c.sendOnly([Buffer.alloc(0), signIn(`live-${k}-${i}`)]);
    // then sign-ins whose minions give up on them: sent, and their connections closed while the lane is busy
    for (const [k, c] of gone.entries()) await c.sendOnly([Buffer.alloc(0), signIn(`gone-${k}`)]);
    await new Promise((r) => setTimeout(r, 30));
    for (const c of gone) c.close();
    let signed = 0;
    for (const c of busy) {
      for (let i = 0; i < perBusy; i++) {
        const frames = await c.receive(60_000);
        const v = decodeWire(frames[frames.length - 1]!);
        if (isMap(v) && Buffer.isBuffer(v.sig)) signed++;
      }
    }
    assert.equal(signed, busyClients * perBusy, "every sign-in on a live connection got its signed reply");
    // each of the others was either worked on (had it been taken before its close was seen) or not, counted as gone
    const total = busyClients * perBusy + leaving;
    let m = await scrapeMetrics(tm);
    const end = Date.now() + 30_000;
    const key = 'brine_request_lane_refused_total{lane="clear",reason="gone"}';
    while ((m.get('salt_master_requests_handled_total{cmd="_auth"}') ?? 0) + (m.get(key) ?? 0) < total && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 100));
      m = await scrapeMetrics(tm);
    }
    const goneN = m.get(key) ?? 0;
    assert.equal((m.get('salt_master_requests_handled_total{cmd="_auth"}') ?? 0) + goneN, total, "each sign-in handled once or counted gone");
    assert.ok(goneN > 0, "sign-ins whose connection had closed before their batch ran were not worked on");
  } finally {
    for (const c of [...busy, ...gone]) c.close();
    await tm.stop();
  }
});

test("a REQ peer that closes while its request is in flight is known gone at once, its request still unanswered", async () => {
  const port = await freePort();
  const board = new ConnBoard();
  const seen: number[] = [];
  const router = new NativeRouter({ backlog: 16 }, (frames) => seen.push(frames[0]!.readUInt32BE(1)), board);
  await router.bind(`tcp://127.0.0.1:${port}`);
  router.start();
  const req = new zmq.Request({ linger: 0 });
  try {
    req.connect(`tcp://127.0.0.1:${port}`);
    await req.send(Buffer.from("a sign-in nobody answers"));
    const end = Date.now() + 5_000;
    while (seen.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    assert.equal(seen.length, 1, "the request reached the router");
    assert.equal(board.gone(seen[0]!), false, "open while its minion waits");
    req.close(); // the minion gave up: 3007.x closes the connection and resends on a new one
    while (!board.gone(seen[0]!) && Date.now() < end + 5_000) await new Promise((r) => setTimeout(r, 10));
    assert.equal(board.gone(seen[0]!), true, "the close was seen while the request was still unanswered");
  } finally {
    if (!req.closed) req.close();
    router.close();
  }
});
