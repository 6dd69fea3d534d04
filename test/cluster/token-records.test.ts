/**
 * eauth tokens across masters (issue #12): a peer's token record is checked strictly before anything is stored,
 * a revocation (tombstone) wins over the token's data whatever order they arrive in and is never undone, and a
 * bulk sync carries both. A single master (no `track`) writes nothing but the tokens themselves.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { TokenStore } from "../../src/lib/auth/tokens.js";
import { tokenExpireSMax } from "../../src/lib/auth/options.js";
import { checkRecord, decodeRecords, encodeRecords, tokenRecordEffect, stampFutureMsMax, tokenDataBytesMax, type HeldToken, type TokenRecord } from "../../src/shared/sync-records.js";
import { SyncStore, encodePull, type SyncCursor } from "../../src/workers/state-sync/sync-store.js";

const NOW = 1_800_000_000_000;
const TOKEN = "ab".repeat(32);

function made(over: Record<string, unknown> = {}, data: Record<string, unknown> = {}): Record<string, unknown> {
  const start = NOW / 1000 - 10.5;
  const v = { token: TOKEN, start, expire: start + 3600, name: "ops", eauth: "sharedsecret", groups: ["admins"], ...data };
  return { k: "tok", token: TOKEN, t: Math.floor(v.start * 1000), x: v.expire, v, ...over };
}

test("a peer's token record is taken only when every field is what a master writes; the reason never quotes the token", () => {
  const good = checkRecord(made(), NOW) as TokenRecord;
  assert.equal(typeof good, "object", String(good));
  assert.equal(good.v?.name, "ops");
  const tomb = checkRecord({ k: "tok", token: TOKEN, t: NOW, x: NOW / 1000 + 60, v: null }, NOW);
  assert.deepEqual(tomb, { k: "tok", token: TOKEN, t: NOW, x: NOW / 1000 + 60, v: null });
  const extra = checkRecord(made({}, { evil: "x", auth_list: [".*"] }), NOW) as TokenRecord;
  assert.equal(extra.v?.evil, undefined, "fields a master does not write are dropped");
  assert.deepEqual(extra.v?.auth_list, [".*"]);

  const start = NOW / 1000 - 10.5;
  const bad: [string, Record<string, unknown>][] = [
    ["upper-case token", made({ token: TOKEN.toUpperCase() }, { token: TOKEN.toUpperCase() })],
    ["short token", made({ token: "ab".repeat(8) }, { token: "ab".repeat(8) })],
    ["path in the token", made({ token: "../../etc/passwd" })],
    ["data for another token", made({}, { token: "cd".repeat(32) })],
    ["expire not the record's", made({ x: start + 7200 })],
    ["expire before start", made({ x: start - 1 }, { expire: start - 1 })],
    ["a life over the longest token_expire", made({ x: start + tokenExpireSMax + 100 }, { expire: start + tokenExpireSMax + 100 })],
    ["start far in the future", made({ t: NOW + stampFutureMsMax + 10_000 }, { start: (NOW + stampFutureMsMax + 10_000) / 1000, expire: (NOW + stampFutureMsMax) / 1000 + 3600 })],
    ["time not the token's start", made({ t: Math.floor(start * 1000) + 5 })],
    ["NaN start", made({}, { start: Number.NaN })],
    ["empty user", made({}, { name: "" })],
    ["NUL in the user", made({}, { name: "ops\0root" })],
    ["user too long", made({}, { name: "u".repeat(5000) })],
    ["eauth with a slash", made({}, { eauth: "../pam" })],
    ["groups not strings", made({}, { groups: [{ $ne: 1 }] })],
    ["auth list not a list", made({}, { auth_list: { ".*": true } })],
    ["token data too large", made({}, { auth_list: ["x".repeat(tokenDataBytesMax)] })],
    ["data a list", made({ v: [] })],
    ["tombstone with NaN expiry", { k: "tok", token: TOKEN, t: NOW, x: Number.NaN, v: null }],
    ["tombstone expiring past any token", { k: "tok", token: TOKEN, t: NOW, x: NOW / 1000 + tokenExpireSMax + 2 * 86400, v: null }],
    ["tombstone with a float time", { k: "tok", token: TOKEN, t: NOW + 0.5, x: NOW / 1000 + 60, v: null }],
  ];
  for (const [what, rec] of bad) {
    const r = checkRecord(rec, NOW);
    assert.equal(typeof r, "string", `${what}: refused`);
    assert.ok(!(r as string).includes(TOKEN) && !(r as string).includes(TOKEN.toUpperCase()), `${what}: the reason does not quote the token`);
  }
  // a whole batch: the good ones kept, the bad ones counted
  const d = decodeRecords(encodeRecords([made() as unknown as TokenRecord, bad[0]![1] as unknown as TokenRecord]), NOW);
  assert.equal(d.records.length, 1);
  assert.equal(d.refused, 1);
});

test("a tombstone wins over the token's data in either order, and nothing undoes it", () => {
  const nowS = NOW / 1000;
  const live = checkRecord(made(), NOW) as TokenRecord;
  const stale = checkRecord(made({ x: nowS - 1, t: Math.floor((nowS - 3601) * 1000) }, { start: nowS - 3601, expire: nowS - 1 }), NOW) as TokenRecord;
  assert.equal(typeof stale, "object", String(stale));
  const tomb: TokenRecord = { k: "tok", token: TOKEN, t: NOW, x: live.x, v: null };
  const staleTomb: TokenRecord = { ...tomb, x: nowS - 1 };
  const table: [HeldToken, TokenRecord, ReturnType<typeof tokenRecordEffect>, string][] = [
    [undefined, live, "put", "a token not held is stored"],
    [undefined, stale, undefined, "an expired token is not stored"],
    ["live", live, undefined, "a token is made once: a second copy changes nothing"],
    ["revoked", live, undefined, "a revoked token never comes back"],
    [undefined, tomb, "revoke", "a revocation that arrives first is kept"],
    ["live", tomb, "revoke", "a revocation drops the token"],
    ["live", staleTomb, "revoke", "even once the token's time is over"],
    [undefined, staleTomb, undefined, "no tombstone for a token already expired"],
    ["revoked", tomb, undefined, "a second revocation changes nothing"],
  ];
  for (const [held, r, want, what] of table) assert.equal(tokenRecordEffect(held, r, nowS), want, what);
});

function tmpStore(): { dir: string; store: Store; cfg: ReturnType<typeof masterDefaults> } {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-tokrec-"));
  const cfg = { ...masterDefaults(), cachedir: dir };
  return { dir, store: openStore(cfg), cfg };
}

test("tracked tokens: made and revoked ones are reported, a peer's older copy cannot bring a revoked one back, the sweep ends the tombstone", async () => {
  const a = tmpStore();
  const b = tmpStore();
  let now = NOW;
  try {
    const sent: TokenRecord[] = [];
    const tokens = new TokenStore(a.store, () => now);
    tokens.track((r) => sent.push(r));
    const tok = await tokens.create({ start: now / 1000, expire: now / 1000 + 60, name: "ops", eauth: "sharedsecret" });
    assert.deepEqual(sent, [{ k: "tok", token: tok.token, t: now, x: tok.expire, v: tok }]);
    const peer = new TokenStore(b.store, () => now);
    const copy = checkRecord(sent[0], now) as TokenRecord;
    assert.equal(await peer.applyPeer(copy), true);
    assert.equal((await peer.get(tok.token))?.name, "ops", "the peer's copy works");

    now += 1000;
    assert.equal(await tokens.remove(tok.token), true);
    assert.deepEqual(sent[1], { k: "tok", token: tok.token, t: now, x: tok.expire, v: null });
    assert.equal(await tokens.remove(tok.token), false, "revoked once");
    assert.equal(await tokens.applyPeer(copy), false, "an older copy of the token is refused");
    assert.equal(await tokens.get(tok.token), undefined);
    assert.deepEqual(tokens.list(), [], "a tombstone is not a token");
    assert.equal(await peer.applyPeer(checkRecord(sent[1], now) as TokenRecord), true);
    assert.equal(await peer.get(tok.token), undefined, "revoked on the peer too");
    assert.equal(await peer.applyPeer(copy), false);

    now += 61_000;
    assert.equal(await tokens.sweep(), 1, "the tombstone goes with the token's time");
    assert.equal(tokens.dump(undefined, 10, 0).records.length, 0);
  } finally {
    await a.store.close();
    await b.store.close();
    rmSync(a.dir, { recursive: true, force: true });
    rmSync(b.dir, { recursive: true, force: true });
  }
});

test("a single master (no track) revokes by deleting the token: no tombstone is written", async () => {
  const a = tmpStore();
  try {
    const tokens = new TokenStore(a.store, () => NOW);
    const tok = await tokens.create({ start: NOW / 1000, expire: NOW / 1000 + 60, name: "ops", eauth: "sharedsecret" });
    assert.equal(await tokens.remove(tok.token), true);
    assert.deepEqual([...a.store.root.openDB({ name: "auth/tokens" }).getKeys()], []);
  } finally {
    await a.store.close();
    rmSync(a.dir, { recursive: true, force: true });
  }
});

test("a bulk sync that asks for tokens carries live tokens and tombstones in small chunks; one that does not (an older master) carries none", async () => {
  const src = tmpStore();
  const dst = tmpStore();
  try {
    const from = new SyncStore(src.cfg, src.store, "m1", () => NOW);
    const to = new SyncStore(dst.cfg, dst.store, "m2", () => NOW);
    from.tokens.track(() => undefined);
    const made: string[] = [];
    for (let i = 0; i < 300; i++) made.push((await from.tokens.create({ start: NOW / 1000 - i, expire: NOW / 1000 + 600, name: `u${i}`, eauth: "sharedsecret" })).token);
    const expired = await from.tokens.create({ start: NOW / 1000 - 100, expire: NOW / 1000 - 1, name: "old", eauth: "sharedsecret" });
    for (const t of made.slice(0, 5)) assert.equal(await from.tokens.remove(t), true);
    // the receiver holds a copy of a revoked token (it missed the revocation)
    await to.tokens.applyPeer(checkRecord({ k: "tok", token: made[0], t: NOW, x: NOW / 1000 + 600, v: { token: made[0], start: NOW / 1000, expire: NOW / 1000 + 600, name: "u0", eauth: "sharedsecret" } }, NOW) as TokenRecord);
    assert.ok(await to.tokens.get(made[0]));

    const pull = async (tokens: boolean) => {
      let cursor: SyncCursor | null = { bank: "data" };
      let chunks = 0;
      while (cursor) {
        const r = await to.applyChunk("m1", from.serve(encodePull({ cursor, since: 0, ...(tokens ? { tokens: true as const } : {}) })));
        assert.ok(!("error" in r), JSON.stringify(r));
        cursor = r.next;
        chunks++;
      }
      return chunks;
    };
    assert.equal(await pull(false), 1);
    assert.equal(to.tokens.list().length, 1, "no token travelled without `tokens`");
    assert.ok((await pull(true)) >= 2, "300 tokens take more than one chunk");
    assert.equal(await to.tokens.get(made[0]), undefined, "the tombstone reached the receiver and dropped its copy");
    for (const t of made.slice(1, 5)) assert.equal(await to.tokens.get(t), undefined);
    for (const t of made.slice(5)) assert.ok(await to.tokens.get(t), "every live token arrived");
    assert.equal(await to.tokens.get(expired.token), undefined, "an expired token is not sent");
    assert.equal(to.tokens.list().length, 295);
  } finally {
    await src.store.close();
    await dst.store.close();
    rmSync(src.dir, { recursive: true, force: true });
    rmSync(dst.dir, { recursive: true, force: true });
  }
});
