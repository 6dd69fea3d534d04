/**
 * A captured request frame stays refused (issue #13; the Python master checks no nonce at all): after a restart
 * (the nonce journal, src/shared/nonce-journal.ts), and once older than the request time window
 * (src/workers/req-handler/replay-window.ts). The cluster half (another master refuses it) is in test/cluster-e2e/hardening.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import { startTestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { NonceSet, packNonces } from "../../src/shared/nonce-set.js";
import { NonceAppender, NonceJournal, nonceFile } from "../../src/shared/nonce-journal.js";
import { replayWindowMs, REQUEST_TS_WINDOW_S_DEFAULT, requestTsWindowS, staleTs } from "../../src/workers/req-handler/replay-window.js";
import { isBrineError } from "../../src/shared/errors.js";

test("a frame a master accepted is refused after the master restarts; frames outside the time window are refused; fresh ones are served", { timeout: 120_000 }, async () => {
  let tm = await startTestMaster({ auto_accept: true });
  const [k] = await testKeys(1);
  const m = fastMinion(tm, "rw-1", k!);
  await m.start();
  const load = { cmd: "_minion_event", id: m.id, tag: "rw/x", data: {} };
  const nonce = newNonce();
  const ts = Math.floor(Date.now() / 1000);
  const send = async (o: { nonce?: string; ts?: number } = {}) => {
    const raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 5000 });
    try {
      const r = await raw.aes(load, { key: m.creds!.session!, id: m.id, keys: k, nonce: o.nonce ?? newNonce(), ...(o.ts !== undefined ? { ts: o.ts } : {}) });
      return r.reply === "bad load" ? "bad load" : r.decrypted === null ? "accepted" : JSON.stringify(r);
    } finally {
      raw.close();
    }
  };
  try {
    assert.equal(await send({ nonce, ts }), "accepted");
    assert.equal(await send({ nonce, ts }), "bad load", "replayed to the same master");
    const w = REQUEST_TS_WINDOW_S_DEFAULT;
    assert.equal(await send({ ts: ts - w - 60 }), "bad load", "older than the window");
    assert.equal(await send({ ts: ts + w + 60 }), "bad load", "ahead of the window");
    assert.equal(await send({ ts: ts - w + 60 }), "accepted", "inside the window");
    await m.stop();
    tm = await tm.restart();
    assert.equal(await send({ nonce, ts }), "bad load", "replayed after the restart");
    assert.equal(await send(), "accepted", "a fresh frame after the restart");
  } finally {
    await m.stop();
    await tm.stop();
  }
});

test("the nonce journal: a worker's and a peer's nonces survive a restart, and only for two windows; a torn file keeps its readable part", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-nj-"));
  try {
    const [a, b, c] = [newNonce(), newNonce(), newNonce()];
    let now = 1_000_000;
    const set1 = new NonceSet(1024);
    const j1 = new NonceJournal(dir, set1, replayWindowMs, () => now);
    assert.equal(j1.load(), 0);
    assert.equal(set1.checkAndInsert(a), true);
    new NonceAppender(dir, set1).append(packNonces([a]));
    j1.peer(packNonces([b]));
    assert.equal(set1.checkAndInsert(b), false, "a peer's nonce is refused here");
    j1.close();
    appendFileSync(nonceFile(dir, set1.generation()), Buffer.from([1, 2, 3])); // a torn last write

    const set2 = new NonceSet(1024);
    const j2 = new NonceJournal(dir, set2, replayWindowMs, () => now);
    assert.equal(j2.load(), 2);
    assert.equal(set2.checkAndInsert(a), false, "the worker's nonce, after the restart");
    assert.equal(set2.checkAndInsert(b), false, "the peer's nonce, after the restart");
    assert.equal(set2.checkAndInsert(c), true);
    new NonceAppender(dir, set2).append(packNonces([c]));
    // rotations: the file of the generation the set forgot is deleted
    const gen = set2.generation();
    now += replayWindowMs;
    j2.rotate();
    now += replayWindowMs;
    j2.rotate();
    assert.deepEqual(readdirSync(dir).sort(), [`nonces.${gen + 1}`, `nonces.${gen + 2}`]);
    j2.close();
    writeFileSync(path.join(dir, "nonces.1"), "not a journal"); // no magic: ignored, removed

    // three windows after a, b and c were written: gone
    now += replayWindowMs;
    const set3 = new NonceSet(1024);
    const j3 = new NonceJournal(dir, set3, replayWindowMs, () => now);
    assert.equal(j3.load(), 0);
    assert.equal(set3.checkAndInsert(c), true);
    assert.deepEqual(readdirSync(dir), [`nonces.${gen + 3}`]);
    j3.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the request time window: brine's symmetric default, Salt's request_server_ttl when set, off at 0; a bad value is a config error", () => {
  const now = 1_000_000_000_000;
  const s = now / 1000;
  assert.equal(staleTs(s - 299, now, 0, 300), undefined);
  assert.match(staleTs(s - 301, now, 0, 300)!, /expired ttl/);
  assert.match(staleTs(s + 301, now, 0, 300)!, /future/);
  assert.equal(staleTs(undefined, now, 0, 0), undefined, "off");
  assert.match(staleTs(undefined, now, 0, 300)!, /no ts/);
  assert.equal(staleTs(s + 3600, now, 60, 300), undefined, "Salt's rule: never refused for being ahead");
  assert.match(staleTs(s - 61, now, 60, 300)!, /expired ttl: 61 > 60/);
  assert.equal(requestTsWindowS({}), REQUEST_TS_WINDOW_S_DEFAULT);
  assert.equal(requestTsWindowS({ brine_request_ts_window_s: 0 }), 0);
  for (const bad of [-1, 1.5, "300", REQUEST_TS_WINDOW_S_DEFAULT + 1]) {
    assert.throws(() => requestTsWindowS({ brine_request_ts_window_s: bad }), (e) => isBrineError(e, "CONFIG_INVALID") && /brine_request_ts_window_s/.test(e.message));
  }
});
