/**
 * Master key pairs for the test masters (test/helpers/master.ts, the ClusterHarness of tools/local-cluster.ts),
 * made once per machine and reused by every run: a 2,048-bit RSA pair costs ~0.3 s of CPU to generate (0.05 to
 * 1.5 s, a prime search), and a suite starts some 350 masters, each of which made its own at its first start
 * (and, in the shared-filesystem cluster, each master of a cluster made a cluster pair too, all but one thrown
 * away). The pool is the minion key pool's mechanism (src/lib/minion/keys.ts: slot i, written atomically, safe
 * for two processes filling it at once) in a directory of its own, so a master never holds a test minion's key.
 *
 * Every call in a process gives the next slot, so the masters one test file starts all hold different keys
 * (two files running at once may hold the same ones: their masters never meet). A directory that already holds
 * `<name>.pem` is left alone: a restarted master keeps its key, and a test that puts its own key there keeps it.
 * Tests about a master making its keys start it without a pair (the harness's `ownKeys`, or not through these).
 */
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ensureKeyPool, loadKeySlot } from "../src/lib/minion/keys.js";

export const MASTER_KEY_POOL_DIR = path.join(os.tmpdir(), "brine-test-master-keys");

let nextSlot = 0;

/**
 * Puts the next pooled pair into `dir` as `<name>.pem` (PKCS#1, mode 0400, as the master writes it) and
 * `<name>.pub` (SPKI, 0644), unless `dir` holds a `<name>.pem`. True when it did.
 */
export async function seedKeyPair(dir: string, name: "master" | "cluster"): Promise<boolean> {
  const pem = path.join(dir, `${name}.pem`);
  if (existsSync(pem)) return false;
  const slot = nextSlot++;
  await ensureKeyPool(slot + 1, { dir: MASTER_KEY_POOL_DIR, concurrency: 1 });
  // loaded as a pair (its public half checked against, or derived from, its private key)
  const pair = loadKeySlot(MASTER_KEY_POOL_DIR, slot);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(path.join(dir, `${name}.pub`), pair.publicPem, { mode: 0o644 });
  writeFileSync(pem, pair.privatePem, { mode: 0o400 });
  chmodSync(pem, 0o400);
  return true;
}
