/**
 * The state-sync thread's resyncs and layouts (src/workers/state-sync/engine.ts) against a scripted peer or a second
 * engine (test/helpers/state-sync-rig.ts): range summaries, pullers of earlier versions, several roots, an earlier
 * version's manifest file, directories larger than a scan sorts in memory, paths longer than an LMDB key.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { cbor } from "../../src/shared/cbor.js";
import { STATUS_DIR } from "../../src/workers/state-sync/messages.js";
import { byManifest, byPath, type ManifestEntry } from "../../src/workers/state-sync/manifest.js";
import type { RootDatabase } from "lmdb";
import { dirNamesInMemoryMax, scratchDb } from "../../src/workers/state-sync/manifest-store.js";
import { rig, pair, sha, type Rig } from "../helpers/state-sync-rig.js";

test("a resync after one file changed among 2,000 walks down a tree of range summaries (the whole, then the one range that differs) and pages the few entries of the one stretch that differs, not the whole manifest", async () => {
  const p = pair();
  try {
    for (let d = 0; d < 20; d++) {
      const dir = path.join(p.server.root, "srv", "salt", `d${String(d).padStart(2, "0")}`);
      mkdirSync(dir, { recursive: true });
      for (let i = 0; i < 100; i++) writeFileSync(path.join(dir, `f${i}.sls`), `file ${d}/${i}\n`);
    }
    const first = await p.puller.syncFrom("p1", ["file_roots"]);
    assert.deepEqual(first.errors, []);
    assert.equal(first.items, 2000);
    // an empty puller's ranges all differ: the whole manifest is paged through the ranges
    assert.equal(p.puller.requests[0]!.r, 1, "the puller says it reads range summaries");
    assert.equal(p.puller.requests[0]!.t, 1, "and trees of them");
    p.puller.requests.length = 0;
    writeFileSync(path.join(p.server.root, "srv", "salt", "d07", "f42.sls"), "changed\n");
    const before = p.bytes();
    const again = await p.puller.syncFrom("p1", ["file_roots"]);
    assert.deepEqual([again.items, again.deleted, again.errors], [1, 0, []]);
    assert.equal(readFileSync(path.join(p.puller.root, "srv", "salt", "d07", "f42.sls"), "utf8"), "changed\n");
    const pages = p.puller.requests.filter((m) => m.op === "manifest");
    // 16 ranges of 125 entries, then the one that differs cut into 16 of 8, then the 8 entries of the one that differs
    assert.deepEqual(pages.map((m) => [m.sub, m.c]), [[undefined, undefined], [1, 125], [undefined, undefined]], "the summary, one range's summary, one page");
    const within = (m: Record<string, unknown>) => (m.from as string) <= "base/d07/f42.sls" && (m.to === undefined || "base/d07/f42.sls" < (m.to as string));
    assert.ok(within(pages[1]!) && within(pages[2]!), "both stretches hold the changed file");
    // 2,000 entries would be ~150 KiB; two summaries of 16 ranges and one page of 8 entries are a few KiB
    assert.ok(p.bytes() - before < 5 * 1024, `resync bytes ${p.bytes() - before}`);
    // nothing changed: the digests match, one short request
    p.puller.requests.length = 0;
    const none = await p.puller.syncFrom("p1", ["file_roots"]);
    assert.deepEqual([none.items, p.puller.requests.length], [0, 1]);
  } finally {
    await p.close();
  }
});

test("a puller of an earlier version gets what it reads from a server with many items: pages without r, the flat summary (ranges of at least 32) with r alone; a tree's top with t", async () => {
  const r = rig(() => {
    throw new Error("no peer traffic expected");
  });
  try {
    for (let i = 0; i < 600; i++) writeFileSync(path.join(r.root, "srv", "salt", `f${String(i).padStart(4, "0")}.sls`), `x${i}`);
    const old = await r.serve({ op: "manifest", ch: "file_roots", n: 1000, w: 2 });
    assert.equal(old.sum, undefined);
    assert.equal(old.entries.length, 600);
    const now = await r.serve({ op: "manifest", ch: "file_roots", n: 1000, w: 2, r: 1 });
    assert.equal(old.entries.length, 600);
    assert.ok(Array.isArray(now.sum) && now.sum.length === Math.ceil(600 / 32), "the new form: a summary of ranges of 32");
    const range = await r.serve({ op: "manifest", ch: "file_roots", n: 1000, w: 2, from: now.sum[1][0], to: now.sum[2][0] });
    assert.deepEqual(range.entries.map((e: { p: string }) => e.p), Array.from({ length: 32 }, (_, i) => `base/f${String(32 + i).padStart(4, "0")}.sls`));
    const tree = await r.serve({ op: "manifest", ch: "file_roots", n: 1000, w: 2, r: 1, t: 1 });
    assert.deepEqual(tree.sum.map((x: unknown[]) => x[2]), [...Array(15).fill(38), 600 - 15 * 38], "a tree's top: 16 ranges with their counts");
    const sub = await r.serve({ op: "manifest", ch: "file_roots", n: 0, sub: 1, from: tree.sum[1][0], to: tree.sum[2][0], c: 38 });
    assert.deepEqual(sub.sum.map((x: unknown[]) => [x[0], x[2]]), Array.from({ length: 13 }, (_, i) => [`base/f${String(38 + 3 * i).padStart(4, "0")}.sls`, i < 12 ? 3 : 2]), "a stretch's summary: its 38 entries cut for 16");
  } finally {
    await r.close();
  }
});

test("a rescan walks several roots of a saltenv in the manifest's order (a directory after the files that sort before its slash), the first root winning a path both have", async () => {
  const r = rig(() => {
    throw new Error("no peer traffic expected");
  }, {});
  const second = path.join(r.root, "srv", "salt2");
  r.cfg.file_roots = { base: [path.join(r.root, "srv", "salt"), second], dev: [path.join(r.root, "srv", "dev")] } as never;
  const put = (dir: string, rel: string, text: string) => {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), text);
  };
  const first = path.join(r.root, "srv", "salt");
  put(first, "nginx/init.sls", "one");
  put(first, "nginx.sls", "one");
  put(second, "nginx.sls", "two");
  put(second, "nginx-extra.sls", "two");
  put(second, "nginx/conf.sls", "two");
  put(path.join(r.root, "srv", "dev"), "top.sls", "dev");
  try {
    const pg = await r.serve({ op: "manifest", ch: "file_roots", n: 100 });
    const got = (pg.entries as ManifestEntry[]).map((e) => e.p);
    assert.deepEqual(got, ["base/nginx-extra.sls", "base/nginx.sls", "base/nginx/conf.sls", "base/nginx/init.sls", "dev/top.sls"]);
    assert.equal((pg.entries as ManifestEntry[])[1]!.h, sha("one"), "the first root's nginx.sls");
    // a second scan of unchanged roots writes nothing: the same entries, the same stamps
    const again = await r.serve({ op: "manifest", ch: "file_roots", n: 100 });
    assert.deepEqual(again.entries, pg.entries);
  } finally {
    await r.close();
  }
});

test("a manifest kept by an earlier version (a CBOR file) is imported once, its tombstones served, and the file removed", async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-statesync-legacy-"));
  const legacy = path.join(root, "cache", STATUS_DIR, "m1", "manifest-file_roots.cbor");
  mkdirSync(path.dirname(legacy), { recursive: true });
  writeFileSync(legacy, cbor.encode([{ e: { p: "base/gone.sls", s: 0, h: "", m: 0, t: Date.now() - 1000, d: 1 } }]) as Uint8Array);
  const r = rig(() => {
    throw new Error("no peer traffic expected");
  }, { cachedir: path.join(root, "cache") });
  try {
    const pg = await r.serve({ op: "manifest", ch: "file_roots", n: 100 });
    assert.deepEqual((pg.entries as ManifestEntry[]).map((e) => [e.p, e.d]), [["base/gone.sls", 1]]);
    assert.equal(existsSync(legacy), false);
  } finally {
    await r.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("a directory with more names than a scan sorts in memory is walked through the scratch database in the manifest's order, every item once, and the scratch left empty", async () => {
  const r = rig(() => {
    throw new Error("no peer request expected");
  });
  try {
    const dir = path.join(r.root, "srv", "salt", "big");
    mkdirSync(path.join(dir, "a"), { recursive: true });
    writeFileSync(path.join(dir, "a", "x"), "x");
    // names whose order differs between JavaScript's sort and the manifest's (code points: an astral character
    // sorts above U+E000-U+FFFF), and siblings of directory `a` that sort around `a/`
    const names = ["a-b", "a.b", "a0", "\u{1F600}", "\uE000", "\uFFFD"];
    for (let i = 0; names.length < dirNamesInMemoryMax + 400; i++) names.push(`k${i}`);
    for (const n of names) writeFileSync(path.join(dir, n), n);
    const expected = [...names.map((n) => `base/big/${n}`), "base/big/a/x"].sort(byPath);
    const all = async () => {
      const got: { p: string; d?: unknown }[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await r.serve({ op: "manifest", ch: "file_roots", n: 1000, ...(after !== undefined ? { after } : {}) });
        got.push(...(page.entries as { p: string; d?: unknown }[]));
        if (!page.more) return got;
        after = got.at(-1)!.p;
      }
    };
    const got = await all();
    assert.deepEqual(got.map((e) => e.p), expected);
    const scratch = scratchDb((r.engine as unknown as { manifests: RootDatabase }).manifests);
    assert.deepEqual([...scratch.getKeys()], [], "the scratch database is empty after the scan");
    // a rescan merges the walk with the kept manifest: one file removed is one tombstone, nothing else changes
    rmSync(path.join(dir, "k5"));
    const again = await all();
    assert.deepEqual(again.map((e) => e.p), expected);
    assert.deepEqual(again.filter((e) => e.d).map((e) => e.p), ["base/big/k5"]);
  } finally {
    await r.close();
  }
});

test("items whose paths are longer than an LMDB key (3,000 bytes, nested directories) are carried to a peer in the manifest's order, and their removal travels as a tombstone", async () => {
  const a = rig(() => {
    throw new Error("the server asks nothing");
  });
  const b = rig((m) => a.serve(m));
  try {
    // 15 directories of 200 characters: item paths of about 3,000 bytes (PATH_MAX is 4,096, NAME_MAX 255)
    const deep = Array.from({ length: 15 }, (_, i) => `${String.fromCharCode(97 + i)}${"d".repeat(199)}`);
    const other = [...deep.slice(0, 14), `n${"e".repeat(199)}`];
    const files: Record<string, string> = {
      "short.sls": "short\n",
      [[...deep, "b.sls"].join("/")]: "long b\n", // b and a share more than 1,940 bytes: ordered by their keys' hash
      [[...deep, "a.sls"].join("/")]: "long a\n",
      [[...deep, "c", "z.sls"].join("/")]: "long c/z\n",
      [[...other, "x.sls"].join("/")]: "long other\n",
    };
    for (const [rel, body] of Object.entries(files)) {
      const full = path.join(a.root, "srv", "salt", rel);
      mkdirSync(path.dirname(full), { recursive: true });
      writeFileSync(full, body);
    }
    const longest = Math.max(...Object.keys(files).map((p) => Buffer.byteLength(`base/${p}`)));
    assert.ok(longest > 2900 && longest < 4096, `longest item path ${longest} bytes`);
    const rep = await b.syncFrom("p1", ["file_roots"]);
    assert.deepEqual(rep.errors, []);
    assert.equal(rep.items, 5);
    for (const [rel, body] of Object.entries(files)) assert.equal(readFileSync(path.join(b.root, "srv", "salt", rel), "utf8"), body, rel);
    // both manifests list the same paths, in the manifest's order (keys' order), and a rescan keeps every item live
    const pathsOf = async (r: Rig) => ((await r.serve({ op: "manifest", ch: "file_roots", n: 1000 })).entries as { p: string; d?: unknown }[]);
    const pa = await pathsOf(a);
    const pb = await pathsOf(b);
    assert.deepEqual(pb.map((e) => e.p), pa.map((e) => e.p));
    assert.deepEqual(pa.map((e) => e.p), Object.keys(files).map((p) => `base/${p}`).sort(byManifest));
    assert.ok(pa.every((e) => !e.d) && pb.every((e) => !e.d), "no tombstone after the rescans");
    // one long item removed at the source: the puller removes it too, the others stay
    rmSync(path.join(a.root, "srv", "salt", ...deep, "a.sls"));
    const again = await b.syncFrom("p1", ["file_roots"]);
    assert.deepEqual(again.errors, []);
    assert.equal(again.deleted, 1);
    assert.ok(!existsSync(path.join(b.root, "srv", "salt", ...deep, "a.sls")));
    assert.equal(readFileSync(path.join(b.root, "srv", "salt", ...deep, "b.sls"), "utf8"), "long b\n");
  } finally {
    await b.close();
    await a.close();
  }
});
