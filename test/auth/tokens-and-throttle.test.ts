/** Token storage (LMDB) and the failed-login throttle, on injected clocks. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { TokenStore } from "../../src/lib/auth/tokens.js";
import { LoginThrottle } from "../../src/lib/auth/throttle.js";

test("tokens survive a reopen of the store, expire on the clock, and the sweep removes only expired ones", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-tok-"));
  let now = 1_000_000_000_000;
  const cfg = { cachedir: dir, brine_lmdb_map_bytes: 64 * 1024 * 1024 };
  try {
    let store = openStore(cfg);
    let tokens = new TokenStore(store, () => now);
    const a = await tokens.create({ start: now / 1000, expire: now / 1000 + 10, name: "a", eauth: "file" });
    const b = await tokens.create({ start: now / 1000, expire: now / 1000 + 1000, name: "b", eauth: "file" });
    assert.notEqual(a.token, b.token);
    await store.close();
    store = openStore(cfg);
    tokens = new TokenStore(store, () => now);
    assert.equal((await tokens.get(a.token))?.name, "a", "kept across a restart");
    now += 11_000;
    assert.equal(await tokens.sweep(), 1);
    assert.equal(await tokens.get(a.token), undefined);
    assert.equal((await tokens.get(b.token))?.name, "b");
    assert.equal(await tokens.get("../../etc/passwd"), undefined, "a malformed token is never looked up");
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the throttle: a user's failures from one source do not lock the user out from another; the window ends it", () => {
  const t = new LoginThrottle({ failuresMax: 3, windowMs: 1000, keysMax: 100 });
  let now = 0;
  for (let i = 0; i < 3; i++) t.failed("alice", "10.0.0.66", now++);
  assert.equal(t.check("alice", "10.0.0.66", now).ok, false);
  assert.equal(t.check("alice", "10.0.0.5", now).ok, true, "alice from her own address");
  assert.equal(t.check("bob", "10.0.0.66", now).ok, true, "the source's own budget is wider");
  now += 1000;
  assert.equal(t.check("alice", "10.0.0.66", now).ok, true, "after the window");
});

test("the throttle: a spray of usernames from one source hits the source's budget", () => {
  const t = new LoginThrottle({ failuresMax: 2, windowMs: 10_000, keysMax: 1000 });
  for (let i = 0; i < 8; i++) t.failed(`user${i}`, "192.0.2.1", i);
  assert.equal(t.check("user99", "192.0.2.1", 9).ok, false);
  assert.equal(t.check("user99", "192.0.2.2", 9).ok, true);
});

test("the throttle: a success clears the user's count; without a source the user alone is the key", () => {
  const t = new LoginThrottle({ failuresMax: 2, windowMs: 10_000, keysMax: 1000 });
  t.failed("carol", undefined, 0);
  t.succeeded("carol", undefined);
  t.failed("carol", undefined, 1);
  assert.equal(t.check("carol", undefined, 2).ok, true);
  t.failed("carol", undefined, 3);
  assert.equal(t.check("carol", undefined, 4).ok, false);
});
