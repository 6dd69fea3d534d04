/** A thread's session keys: a key a peer sent a moment ago opens a request before the 1 s cache would show it. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Crypticle, generateKeyString } from "../../src/shared/protocol/crypticle.js";
import { applyPeerSessionKey, sessionRefreshMsMin, SessionKeys } from "../../src/lib/store/sessions.js";
import { isBrineError } from "../../src/shared/errors.js";
import { SessionTable } from "../../src/shared/session-table.js";

test("a request sealed with a peer's newer key or the thread's own key is opened, and answered with the key it came with", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-sess-"));
  try {
    let now = Date.now();
    const created: string[] = [];
    const keys = new SessionKeys(dir, 86400, () => now);
    keys.track((c) => created.push(c.key));
    const own = keys.get("web1");
    assert.deepEqual(created, [own.key], "the key this thread created is reported for the peers");
    const peerKey = generateKeyString();
    assert.equal(applyPeerSessionKey(path.join(dir, "sessions"), "web1", { key: peerKey, t: now + 5 }, 86400_000, now), true);
    now += sessionRefreshMsMin; // still inside the thread's 1 s cache
    const nonce = "0123456789abcdef0123456789abcdef";
    const c = keys.get("web1").crypticle;
    const viaPeer = new Crypticle(peerKey);
    assert.deepEqual(c.loads(viaPeer.dumps({ cmd: "_return", nonce })), { cmd: "_return", nonce });
    assert.deepEqual(viaPeer.loads(c.dumps({ ok: 1 }, nonce), { nonce }), { ok: 1 }, "the reply is sealed with the peer's key");
    const viaOwn = new Crypticle(own.key);
    const n2 = "fedcba9876543210fedcba9876543210";
    assert.deepEqual(c.loads(viaOwn.dumps({ nonce: n2 })), { nonce: n2 });
    assert.deepEqual(viaOwn.loads(c.dumps({ ok: 2 }, n2), { nonce: n2 }), { ok: 2 });
    assert.throws(() => c.loads(new Crypticle(generateKeyString()).dumps({ nonce })), (e) => isBrineError(e, "CRYPTICLE_AUTH"), "an unknown key is refused");
    now += 2000;
    assert.equal(keys.get("web1").key, peerKey, "after the cache lifetime the newest key is current (what auth hands out)");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a sign-in right after a peer's newer key arrived hands out that key, though threads saw the older one under a second ago", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-sess-"));
  try {
    let now = Date.now();
    const table = new SessionTable(SessionTable.create(64));
    const signIns = new SessionKeys(dir, 86400, () => now, table);
    const decodes = new SessionKeys(dir, 86400, () => now, table); // another request thread of the same master
    const own = signIns.get("web3").key;
    assert.equal(decodes.find("web3")?.key, own, "the other thread checked the file and shared its check");
    const peerKey = generateKeyString();
    now += 5;
    assert.equal(applyPeerSessionKey(path.join(dir, "sessions"), "web3", { key: peerKey, t: now }, 86400_000, now), true);
    now += 100; // inside both threads' 1 s cache and the table record's
    assert.equal(signIns.get("web3").key, peerKey, "the sign-in on the thread that made the older key");
    assert.equal(decodes.get("web3").key, peerKey, "the sign-in on the thread whose check the table holds");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("find() gives the live key a master holds and never makes one: none for a minion without a file, none for an expired key", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-sess-"));
  try {
    let now = Date.now();
    const created: string[] = [];
    const keys = new SessionKeys(dir, 60, () => now);
    keys.track((c) => created.push(c.key));
    assert.equal(keys.find("web2"), undefined, "no file: no key");
    assert.deepEqual(created, [], "and none made");
    const k = keys.get("web2").key; // a sign-in makes it
    assert.equal(keys.find("web2")?.key, k);
    const sealed = new Crypticle(k).dumps({ nonce: "0123456789abcdef0123456789abcdef" });
    assert.equal(keys.opens("web2", sealed), true);
    assert.equal(keys.opens("web2", new Crypticle(generateKeyString()).dumps({})), false, "another key's message is not opened");
    now += 61_000; // past publish_session
    assert.equal(keys.find("web2"), undefined, "an expired key opens nothing");
    assert.equal(keys.opens("web2", sealed), false);
    assert.deepEqual(created, [k], "and find() renewed nothing: only the sign-in's key was made");
    assert.notEqual(keys.get("web2").key, k, "a sign-in renews it");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
