/**
 * A directory channel's rescan (src/workers/state-sync/sources.ts DirSource) racing with what changes the directory
 * while it runs. The walk lists a directory before it compares it with the kept manifest, so an item installed
 * after the listing (a pull from a peer while the key channels' timer rescans) is in the manifest but not in the
 * walk: it must stay live, never become a tombstone stamped now (which would beat the peer's item on every master
 * and delete the key there). The race is made deterministic: a directory of more names than a scan sorts in memory
 * is listed into the scratch database, and the first read back from it (the listing is complete) is where the test
 * installs its item, as an install does: the file renamed into place, then its entry written.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { RootDatabase } from "lmdb";
import type { MasterConfig } from "../../src/shared/config/defaults.js";
import { DirSource } from "../../src/workers/state-sync/sources.js";
import { dirNamesInMemoryMax, manifestDb, openManifests, scratchDb, type ScratchDb } from "../../src/workers/state-sync/manifest-store.js";

const sha = (b: string) => createHash("sha256").update(b).digest("hex");

function setup(): { root: string; dir: string; manifests: RootDatabase; cfg: MasterConfig } {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-scan-race-"));
  const cfg = { cachedir: path.join(root, "cache") } as unknown as MasterConfig;
  const dir = path.join(root, "srv");
  mkdirSync(dir, { recursive: true });
  return { root, dir, manifests: openManifests(cfg), cfg };
}

/** The scratch database, with `hook` run once at the first read back of a listing (the directory has been listed whole). */
function hooked(scratch: ScratchDb, hook: () => void): ScratchDb {
  let fired = false;
  return new Proxy(scratch, {
    get(t, k) {
      if (k === "getRange" && !fired) {
        fired = true;
        hook();
      }
      const v = Reflect.get(t, k) as unknown;
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}

test("an item installed while a rescan runs, after the scan listed its directory, stays live in the manifest: no tombstone for a file that is there", async () => {
  const { root, dir, manifests } = setup();
  try {
    const names = Array.from({ length: dirNamesInMemoryMax + 50 }, (_, i) => `k${String(i).padStart(5, "0")}`);
    for (const n of names) writeFileSync(path.join(dir, n), n);
    const db = manifestDb(manifests, "file_roots");
    let installedDuringScan = false;
    const scratch = hooked(scratchDb(manifests), () => {
      // what an install does: the file renamed into place, then its manifest entry (sorting after every listed name)
      writeFileSync(path.join(dir, "zz-installed"), "from a peer");
      const st = statSync(path.join(dir, "zz-installed"));
      db.putSync("base/zz-installed", { s: 11, h: sha("from a peer"), m: 0o644, t: 1000, g: `${st.size}:${st.mtimeMs}:${st.ino}` });
      installedDuringScan = true;
    });
    const src = new DirSource("file_roots", () => [{ prefix: "base", dir, depth: 0 }], (parts) => ({ root: dir, rest: parts.slice(1) }), db, path.join(root, "none.cbor"), () => 5000, scratch);
    await src.scan();
    assert.ok(installedDuringScan, "the install ran between the listing and the comparison");
    assert.deepEqual(src.entry("base/zz-installed"), { p: "base/zz-installed", s: 11, h: sha("from a peer"), m: 0o644, t: 1000 }, "the installed item is live with the peer's stamp");
    const tombstones = [...src.entries()].filter((e) => e.d).map((e) => e.p);
    assert.deepEqual(tombstones, []);
    // a file really removed is still a tombstone
    rmSync(path.join(dir, "k00007"));
    await src.scan();
    assert.deepEqual([...src.entries()].filter((e) => e.d).map((e) => e.p), ["base/k00007"]);
    assert.equal(src.entry("base/zz-installed")?.d, undefined);
    await src.stop();
  } finally {
    await manifests.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("a scan asked for while another runs is a scan of its own after it: a file written after the running scan listed its directory is in the manifest when the caller's scan resolves", async () => {
  const { root, dir, manifests } = setup();
  try {
    const names = Array.from({ length: dirNamesInMemoryMax + 50 }, (_, i) => `k${String(i).padStart(5, "0")}`);
    for (const n of names) writeFileSync(path.join(dir, n), n);
    const db = manifestDb(manifests, "file_roots");
    const plain = scratchDb(manifests);
    const src0 = new DirSource("file_roots", () => [{ prefix: "base", dir, depth: 0 }], (parts) => ({ root: dir, rest: parts.slice(1) }), db, path.join(root, "none.cbor"), () => 5000, plain);
    await src0.scan(); // every name kept
    await src0.stop();
    let second: Promise<void> | undefined;
    const scratch = hooked(plain, () => {
      // the running scan has listed the directory: an operator writes a file, and a pull asks for a scan
      writeFileSync(path.join(dir, "zz-new"), "new");
      second = src.scan();
    });
    const src = new DirSource("file_roots", () => [{ prefix: "base", dir, depth: 0 }], (parts) => ({ root: dir, rest: parts.slice(1) }), db, path.join(root, "none.cbor"), () => 6000, scratch);
    const first = src.scan();
    await first;
    assert.ok(second, "the second scan was asked while the first ran");
    await second;
    const e = src.entry("base/zz-new");
    assert.deepEqual([e?.s, e?.h, e?.d], [3, sha("new"), undefined], "the scan the caller waited for saw the new file");
    await src.stop();
  } finally {
    await manifests.close();
    rmSync(root, { recursive: true, force: true });
  }
});
