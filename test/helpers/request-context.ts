/**
 * One request thread's context (MasterContext) in this process, for tests that drive the request path
 * (src/workers/req-handler/request.ts) directly: a temporary root with the master's keys, one accepted minion, the
 * AES key set, the subsystems installed. `close` closes its store and removes the root.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { MasterContext } from "../../src/workers/req-handler/context.js";
import { installSubsystems } from "../../src/workers/req-handler/subsystems.js";
import { loadOrCreateKeyPair } from "../../src/lib/pki/master-keys.js";
import { KeyStore } from "../../src/lib/pki/key-store.js";
import { SharedSecrets } from "../../src/shared/secrets.js";
import { NonceSet } from "../../src/shared/nonce-set.js";
import { generateKeyString } from "../../src/shared/protocol/crypticle.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { configureLogging } from "../../src/shared/log.js";
import { testKeys } from "./minions.js";

export interface RequestContext {
  ctx: MasterContext;
  root: string;
  /** the master's AES key (what a v2 minion's requests are sealed with) */
  aesKey: string;
  /** the accepted minion's keys */
  keys: MinionKeys;
  close(): Promise<void>;
}

/** A context under a new root named `prefix…` in the temporary directory, with `minion` accepted. */
export async function requestContext(prefix: string, minion: string): Promise<RequestContext> {
  configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });
  const root = mkdtempSync(path.join(os.tmpdir(), prefix));
  const cfg = { ...masterDefaults(), id: "m", pki_dir: path.join(root, "pki"), cachedir: path.join(root, "cache"), sock_dir: path.join(root, "sock"), file_roots: { base: [path.join(root, "srv")] }, pillar_roots: { base: [path.join(root, "pillar")] } };
  for (const d of [cfg.cachedir, ...cfg.file_roots.base, ...cfg.pillar_roots.base]) mkdirSync(d, { recursive: true });
  const store = new KeyStore(cfg.pki_dir);
  store.ensureDirs();
  loadOrCreateKeyPair(cfg.pki_dir, "master", 2048);
  const keys = (await testKeys(1))[0]!;
  store.write("accepted", minion, keys.publicPem);
  const secrets = new SharedSecrets();
  const aesKey = generateKeyString();
  secrets.setAesKey(aesKey);
  const ctx = new MasterContext(cfg, { secrets: secrets.sab, nonces: new NonceSet(1 << 16).sab, jids: new SharedArrayBuffer(8) });
  await installSubsystems(ctx);
  return {
    ctx,
    root,
    aesKey,
    keys,
    async close() {
      await ctx.store.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
