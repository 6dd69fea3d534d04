/**
 * A request thread's copy of the accepted keys (localfs_key): what the v3 request path and a sign-in see when
 * another process (salt-key, a human's `mv` or `cp`) changes `minions/`, and the directory stamp beneath it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { KeyDirStamp } from "../../src/lib/pki/key-dir-stamp.js";
import { AcceptedKeyCache, KeyStore } from "../../src/lib/pki/key-store.js";
import { cleanKey } from "../../src/shared/protocol/pem.js";
import { KeyTable } from "../../src/shared/key-table.js";

/** Each test runs with the thread's own copies (no table) and with the master's shared table (src/shared/key-table.ts). */
const MODES = [
  { name: "own copies", table: (): KeyTable | undefined => undefined },
  { name: "shared table", table: (): KeyTable | undefined => new KeyTable(KeyTable.create(64)) },
];

const PUB = (n: string) => `-----BEGIN PUBLIC KEY-----\n${n}\n-----END PUBLIC KEY-----\n`;

/** Another process changes the file (the thread learns of it only from the disk). */
function otherProcess(code: string): void {
  execFileSync(process.execPath, ["-e", code]);
}

test("a key directory's stamp: one stat per look, a new version for each change seen, none vouched for while the mtime is under a second old", () => {
  // [now, the directory's mtime at that moment, the version current() answers]
  const cases: { name: string; steps: [number, number | undefined, number | undefined][] }[] = [
    { name: "stable directory", steps: [[10_000, 1_000, 1], [10_100, 1_000, 1], [10_400, 1_000, 1]] },
    { name: "a change seen at the next look (250 ms)", steps: [[10_000, 1_000, 1], [10_100, 10_050, 1], [10_300, 10_050, undefined], [11_000, 10_050, undefined], [11_300, 10_050, 2]] },
    { name: "changed less than racyMs before the look", steps: [[10_000, 9_500, undefined], [10_200, 9_500, undefined], [10_600, 9_500, 1]] },
    { name: "unreadable directory", steps: [[10_000, undefined, undefined], [10_300, 1_000, 2]] },
    { name: "the clock went back: looks again", steps: [[10_000, 1_000, 1], [9_000, 2_000, 2]] },
  ];
  for (const c of cases) {
    let mtime: number | undefined;
    let stats = 0;
    const stamp = new KeyDirStamp(() => (stats++, mtime));
    let expectedStats = 0;
    let lastLook = -Infinity;
    for (const [now, m, want] of c.steps) {
      mtime = m;
      if (now - lastLook >= 250 || now < lastLook) {
        expectedStats++;
        lastLook = now;
      }
      assert.equal(stamp.current(now), want, `${c.name} at ${now}`);
      assert.equal(stats, expectedStats, `${c.name}: stats at ${now}`);
    }
  }
  let mtime = 1_000;
  const stamp = new KeyDirStamp(() => mtime);
  assert.equal(stamp.current(10_000), 1);
  mtime = 10_010;
  assert.equal(stamp.current(10_020), 1, "not looked at again within 250 ms");
  stamp.touch();
  assert.equal(stamp.current(10_030), undefined, "touch(): looked at again at once, and the change is too recent to vouch for");
});

for (const mode of MODES)
  test(`the request path's copy of an accepted key: a key deleted or moved away by another process is dropped at the stamp's next look, with no read per request in between (${mode.name})`, () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-akc-"));
  try {
    const ks = new KeyStore(dir);
    ks.ensureDirs();
    const acceptedDir = path.join(dir, "minions");
    const file = path.join(acceptedDir, "m1");
    writeFileSync(file, PUB("one"));
    const past = (Date.now() - 60_000) / 1000;
    utimesSync(acceptedDir, past, past); // settled a minute ago: the stamp vouches for it
    let now = Date.now();
    const cache = new AcceptedKeyCache(ks, 1000, 16, () => now, undefined, mode.table());
    assert.equal(cache.get("m1")?.pem, cleanKey(PUB("one")));
    otherProcess(`require("fs").writeFileSync(${JSON.stringify(file)}, ${JSON.stringify(PUB("two"))})`); // in place: the directory's mtime stays
    now += 5_000;
    assert.equal(cache.get("m1")?.pem, cleanKey(PUB("one")), "past the 1 s window, still the copy: the directory did not change");
    now += 5_000;
    assert.equal(cache.get("m1")?.pem, cleanKey(PUB("two")), "an in-place rewrite is read again after trustMsMax (10 s)");
    otherProcess(`require("fs").renameSync(${JSON.stringify(file)}, ${JSON.stringify(path.join(dir, "minions_rejected", "m1"))})`);
    const past2 = past + 1;
    utimesSync(acceptedDir, past2, past2); // as if the move were over a second ago (the stamp vouches again)
    now += 100;
    assert.equal(cache.get("m1")?.pem, cleanKey(PUB("two")), "within 250 ms of the last look, the copy");
    now += 250;
    assert.equal(cache.get("m1")?.pem, undefined, "moved away: gone at the stamp's next look");

    // the directory changing now: the stamp cannot vouch, the 1 s window of before applies. The clock is held at
    // the write's time (not the real one): the other process that unlinks takes over a second to start on a
    // loaded box, which ran the window out before the look meant to fall inside it (a CI run at load 30)
    let off = 0;
    const t0 = Date.now();
    const live = new AcceptedKeyCache(ks, 1000, 16, () => t0 + off, undefined, mode.table());
    writeFileSync(file, PUB("three"));
    assert.equal(live.get("m1")?.pem, cleanKey(PUB("three")), "absent keys are never cached");
    otherProcess(`require("fs").unlinkSync(${JSON.stringify(file)})`);
    assert.equal(live.get("m1")?.pem, cleanKey(PUB("three")), "while the directory is changing, the 1 s window of before");
    off = 1_000;
    assert.equal(live.get("m1")?.pem, undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const mode of MODES)
  test(`a sign-in's copy of an accepted key follows the file at once: deleted, rewritten in place or replaced by a rename (${mode.name})`, { timeout: 20_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-akc-"));
  try {
    const ks = new KeyStore(dir);
    ks.ensureDirs();
    const file = path.join(dir, "minions", "m1");
    writeFileSync(file, PUB("one"));
    await new Promise((r) => setTimeout(r, 1_100)); // the file settles: its copy may be kept
    const cache = new AcceptedKeyCache(ks, 1000, 16, Date.now, undefined, mode.table());
    assert.equal(cache.getFresh("m1")?.pem, cleanKey(PUB("one")));
    otherProcess(`require("fs").writeFileSync(${JSON.stringify(file)}, ${JSON.stringify(PUB("own"))})`); // same size, in place
    assert.equal(cache.getFresh("m1")?.pem, cleanKey(PUB("own")), "rewritten in place: the new text at once");
    otherProcess(`const fs = require("fs"); fs.writeFileSync(${JSON.stringify(file + ".x")}, ${JSON.stringify(PUB("two"))}); fs.renameSync(${JSON.stringify(file + ".x")}, ${JSON.stringify(file)})`);
    assert.equal(cache.getFresh("m1")?.pem, cleanKey(PUB("two")), "replaced by a rename: the new key at once");
    otherProcess(`require("fs").unlinkSync(${JSON.stringify(file)})`);
    assert.equal(cache.getFresh("m1")?.pem, undefined, "deleted: gone at once");
    assert.equal(cache.get("m1")?.pem, undefined, "and for the request path too");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("brine's own key writes rename a complete file into place and move the directory's mtime, also when a key is replaced", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-akc-"));
  try {
    const ks = new KeyStore(dir);
    ks.ensureDirs();
    ks.write("accepted", "m1", PUB("one"));
    const acceptedDir = path.join(dir, "minions");
    const past = (Date.now() - 60_000) / 1000;
    utimesSync(acceptedDir, past, past);
    const stamp = ks.dirStamp("accepted")!;
    const now = Date.now();
    const v = stamp.current(now);
    assert.notEqual(v, undefined);
    ks.write("accepted", "m1", PUB("two"));
    assert.equal(ks.read("accepted", "m1"), PUB("two"));
    assert.deepEqual(ks.list("accepted"), ["m1"], "no temp file left behind");
    assert.equal(stamp.current(now + 1), undefined, "this thread's write: looked at again at once, and changed");
    utimesSync(acceptedDir, past, past);
    assert.notEqual(stamp.current(now + 300), v, "a new version");
    assert.equal(ks.remove("accepted", "m1"), true);
    assert.equal(ks.remove("accepted", "m1"), false, "already gone");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const mode of MODES)
  test(`an id no key file can have ('', '.', '..', a path) has no accepted key and throws nothing, on the request path and at sign-in (${mode.name})`, () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-akc-"));
  try {
    const ks = new KeyStore(dir);
    ks.ensureDirs();
    const cache = new AcceptedKeyCache(ks, 1000, 16, Date.now, undefined, mode.table());
    for (const id of ["", ".", "..", "a/b", "../minions"]) {
      assert.equal(cache.get(id)?.pem, undefined, JSON.stringify(id));
      assert.equal(cache.getFresh(id)?.pem, undefined, JSON.stringify(id));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
