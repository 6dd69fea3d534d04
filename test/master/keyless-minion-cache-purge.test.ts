/**
 * Salt's check_minion_cache: after `salt-key -d`, the deleted minion's grains, pillar, mine and session
 * key leave the master's caches at the next background cleanup; minions with a key in any state keep
 * theirs, and `preserve_minion_cache: True` keeps everything.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { generateKeyPairSync } from "node:crypto";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { MasterContext } from "../../src/workers/req-handler/context.js";
import { purgeKeylessMinions } from "../../src/workers/req-handler/keyless-purge.js";
import { loadOrCreateKeyPair } from "../../src/lib/pki/master-keys.js";
import { KeyStore } from "../../src/lib/pki/key-store.js";
import { SharedSecrets } from "../../src/shared/secrets.js";
import { NonceSet } from "../../src/shared/nonce-set.js";
import { generateKeyString } from "../../src/shared/protocol/crypticle.js";

async function context(overrides: Partial<MasterConfig> = {}): Promise<{ ctx: MasterContext; keys: KeyStore; root: string }> {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-purge-"));
  const cfg = { ...masterDefaults(), id: "m", pki_dir: path.join(root, "pki"), cachedir: path.join(root, "cache"), sock_dir: path.join(root, "sock"), ...overrides };
  mkdirSync(cfg.cachedir, { recursive: true });
  const keys = new KeyStore(cfg.pki_dir);
  keys.ensureDirs();
  loadOrCreateKeyPair(cfg.pki_dir, "master", 2048);
  const secrets = new SharedSecrets();
  secrets.setAesKey(generateKeyString());
  const ctx = new MasterContext(cfg, { secrets: secrets.sab, nonces: new NonceSet(1024).sab, jids: new SharedArrayBuffer(8) });
  return { ctx, keys, root };
}

const pub = generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey.export({ type: "spki", format: "pem" }) as string;

test("a deleted minion's data, mine and session key are purged; minions with a key in any state keep theirs", async () => {
  const { ctx, keys, root } = await context();
  const states = { kept: "accepted", waiting: "pending", refused: "rejected", banned: "denied" } as const;
  for (const [id, state] of Object.entries(states)) keys.write(state, id, pub);
  for (const id of [...Object.keys(states), "deleted"]) {
    await ctx.minionCache.put(id, { grains: { id } });
    await ctx.minionCache.setMine(id, { "test.ping": true });
    ctx.sessions.get(id);
  }
  // salt-key -d deleted's key (it never had one here); a minion with only mine data counts too
  await ctx.minionCache.setMine("mine-only", { x: 1 });

  const purged = await purgeKeylessMinions(ctx);
  assert.equal(purged, 2);
  assert.equal(ctx.minionCache.get("deleted"), undefined);
  assert.equal(ctx.minionCache.mine("deleted"), undefined);
  assert.equal(ctx.minionCache.mine("mine-only"), undefined);
  assert.equal(existsSync(path.join(ctx.sessions.dir, "deleted")), false);
  for (const id of Object.keys(states)) {
    assert.deepEqual(ctx.minionCache.get(id)?.grains, { id }, id);
    assert.ok(ctx.minionCache.mine(id), id);
    assert.ok(existsSync(path.join(ctx.sessions.dir, id)), id);
  }
  assert.equal(await purgeKeylessMinions(ctx), 0, "nothing left to purge");
  await ctx.store.close();
  rmSync(root, { recursive: true, force: true });
});

test("preserve_minion_cache keeps a deleted minion's data", async () => {
  const { ctx, root } = await context({ preserve_minion_cache: true });
  await ctx.minionCache.put("deleted", { grains: { a: 1 } });
  ctx.sessions.get("deleted");
  assert.equal(await purgeKeylessMinions(ctx), 0);
  assert.deepEqual(ctx.minionCache.get("deleted")?.grains, { a: 1 });
  assert.ok(existsSync(path.join(ctx.sessions.dir, "deleted")));
  await ctx.store.close();
  rmSync(root, { recursive: true, force: true });
});
