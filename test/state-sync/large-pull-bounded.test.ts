/**
 * A large pull under a heap bound scaled down so that memory growing with the item count cannot pass: both masters'
 * state-sync threads (test/helpers/state-sync-pair.ts, each as a master starts it) run with an old generation of
 * oldGenMb, about 6 MiB above what the thread holds after a collection (~8.5 MiB since the mirror runs in a thread of
 * its own: its code, modules and LMDB handles), and the puller pulls `files` files whose item paths are ~970 bytes each.
 * Anything kept per item for the length of the pull (a manifest held in memory, as before session 8, or the list of
 * every item to fetch) costs more than a path per item, about 7.5 MiB at this count: the thread would end with
 * ERR_WORKER_OUT_OF_MEMORY (the host restarts it, and this test fails on the restart; checked with every installed entry
 * kept, sessions 11 and 12: it fails). A smaller per-item cost
 * (a set of hashes: ~100 bytes an item) would pass: this catches a design that holds the items, not every leak.
 * Files on tmpfs where there is one (the per-item file system calls are most of the time).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { stateSyncCfg, stateSyncPair } from "../helpers/state-sync-pair.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { bankItemBytesMax } from "../../src/workers/state-sync/store-sources.js";
import { stateSyncHeapLimits } from "../../src/main-thread/state-sync-host.js";

const files = 7_000;
const perDir = 1000;
const oldGenMb = 15;
/** one path segment of ~240 bytes: item paths of base/<dir>/<sub>/<sub2>/<file> are ~970 bytes */
const long = (tag: string) => `${tag}-${"x".repeat(236 - tag.length)}`;

test(`a pull of ${files.toLocaleString("en-US")} items with ~970-byte paths completes on both sides under an old generation of ${oldGenMb} MiB, with no restart`, { timeout: 180_000 }, async () => {
  const tmp = existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir();
  const root = mkdtempSync(path.join(tmp, "brine-statesync-large-"));
  try {
    for (let d = 0; d < files / perDir; d++) {
      const dir = path.join(root, "a", "srv", "salt", long(`d${d}`), long("sub"), long("sub2"));
      mkdirSync(dir, { recursive: true });
      for (let i = 0; i < perDir; i++) writeFileSync(path.join(dir, `${long(`f${i}`)}.sls`), `item ${d}/${i}\n`);
    }
    const bound = { resourceLimits: { maxYoungGenerationSizeMb: 3, maxOldGenerationSizeMb: oldGenMb } };
    const { a, b, stop } = await stateSyncPair(root, { a: bound, b: bound });
    try {
      const t0 = Date.now();
      const r = await b.link.syncFrom("a", ["file_roots"]);
      const secs = (Date.now() - t0) / 1000;
      assert.deepEqual(r.errors, []);
      assert.equal(r.items, files);
      assert.equal(a.thread.restarts + b.thread.restarts, 0, "neither thread reached its bound");
      let installed = 0;
      for (const d of readdirSync(b.roots)) installed += readdirSync(path.join(b.roots, d, long("sub"), long("sub2"))).length;
      assert.equal(installed, files);
      console.log(`# pulled ${files} items in ${secs.toFixed(1)} s (load ${os.loadavg()[0]!.toFixed(1)})`);
    } finally {
      await stop();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

const longestFiles = 2000;
/**
 * longestFiles items under `dir`, each in a chain of its own: a first segment that tells it apart (paths longer than
 * shortPathBytesMax that share their first 1,940 bytes are kept out of order, manifest-store.ts), 14 more of 250 bytes
 * and a short file name: item paths of ~3,770 bytes (itemPathBytesMax is 4,096).
 */
function longestRoots(dir: string, tag: string): void {
  const deep = Array.from({ length: 14 }, (_, i) => `${i}`.padEnd(250, "y"));
  for (let i = 0; i < longestFiles; i++) {
    const at = path.join(dir, `${String(i).padStart(5, "0")}`.padEnd(250, "d"), ...deep);
    mkdirSync(at, { recursive: true });
    writeFileSync(path.join(at, "f.sls"), `item ${tag} ${i}\n`);
  }
}
test(`a pull of ${longestFiles.toLocaleString("en-US")} items whose paths are near the longest allowed (~3,770 bytes; a page of 1,000 would hold ~3.7 MiB of them) completes on both sides under the bound a master gives the state-sync thread (old generation ${stateSyncHeapLimits.maxOldGenerationSizeMb} MiB), with no restart`, { timeout: 180_000 }, async () => {
  const tmp = existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir();
  const root = mkdtempSync(path.join(tmp, "brine-statesync-longest-"));
  try {
    longestRoots(path.join(root, "a", "srv", "salt"), "a");
    const { a, b, stop } = await stateSyncPair(root);
    try {
      const r = await b.link.syncFrom("a", ["file_roots"]);
      assert.deepEqual(r.errors, []);
      assert.equal(r.items, longestFiles);
      assert.equal(a.thread.restarts + b.thread.restarts, 0, "neither thread reached its bound");
      assert.equal(readdirSync(b.roots).length, longestFiles);
    } finally {
      await stop();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

const bankRecords = 24;
const wideEntries = Math.floor(bankItemBytesMax / 16.5);
test(`at once, both ways: a bank of ${bankRecords} returns each just under the bank item bound, of small maps (what expands most once decoded), and ${longestFiles.toLocaleString("en-US")} roots items of the longest paths, pulled under the bound a master gives the state-sync thread, with no restart`, { timeout: 240_000 }, async () => {
  const tmp = existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir();
  const root = mkdtempSync(path.join(tmp, "brine-statesync-bank-"));
  try {
    longestRoots(path.join(root, "a", "srv", "salt"), "a");
    longestRoots(path.join(root, "b", "srv", "pillar"), "b");
    const { a, b, stop } = await stateSyncPair(root);
    try {
      const store = openStore(stateSyncCfg("a", a.root));
      // maps of two small entries, ~16 bytes each as LMDB stores them: just under bankItemBytesMax, ten times that in
      // objects once decoded
      const wide: Record<string, { n: number; s: string }> = {};
      for (let i = 0; i < wideEntries; i++) wide[`k${i}`] = { n: i, s: "v" };
      const jid = (i: number) => `2026112500000000${String(i).padStart(4, "0")}`;
      for (let i = 0; i < bankRecords; i++) await store.returns.put(`${jid(i)}/m${i}`, { return: wide, retcode: 0 });
      const stored = store.returns.getBinaryFast(`${jid(0)}/m0`)!.length;
      assert.ok(stored > bankItemBytesMax * 0.8 && stored <= bankItemBytesMax, `a record is stored in ${stored} bytes`);
      const [bank, roots, back] = await Promise.all([b.link.syncFrom("a", ["bank:jobs/returns"]), b.link.syncFrom("a", ["file_roots"]), a.link.syncFrom("b", ["pillar_roots"])]);
      for (const r of [bank, roots, back]) assert.deepEqual(r.errors, []);
      assert.equal(bank.items, bankRecords);
      assert.equal(roots.items, longestFiles);
      assert.equal(back.items, longestFiles);
      assert.equal(a.thread.restarts + b.thread.restarts, 0, "neither thread reached its bound");
      const mine = openStore(stateSyncCfg("b", b.root));
      assert.equal(Object.keys((mine.returns.get(`${jid(bankRecords - 1)}/m${bankRecords - 1}`) as { return: object }).return).length, wideEntries);
    } finally {
      await stop();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
