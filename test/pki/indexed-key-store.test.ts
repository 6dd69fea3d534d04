/**
 * The indexed key store (`keys.cache_driver: mmap_key`, src/lib/pki/key-db.ts): a reader's listing follows
 * writes made through another handle or another process, by the generation counter and the change log,
 * without scanning the store again; a reader further behind than the log reloads; KeyStore keeps the file
 * layout's meanings (move of a missing key is ENOENT, an id may sit in two states) without touching the
 * key directories.
 */
import { KeyTable } from "../../src/shared/key-table.js";
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { open } from "lmdb";
import { KeyDb, keyDbDir, pubDigest } from "../../src/lib/pki/key-db.js";
import { SortedIds } from "../../src/lib/pki/sorted-ids.js";
import { AcceptedKeyCache, KeyStore, closeKeyDbs, keyCacheDriver, prepareKeyStore } from "../../src/lib/pki/key-store.js";
import { isBrineError } from "../../src/shared/errors.js";
import { cleanKey } from "../../src/shared/protocol/pem.js";

const PUB = (n: string) => `-----BEGIN PUBLIC KEY-----\n${n}\n-----END PUBLIC KEY-----\n`;

/** lmdb-js renews a thread's read snapshot on a timer turn after it was taken (setTimeout 0): wait past one. */
const nextTurn = () => new Promise((r) => setTimeout(r, 5));

function tmp(): string {
  return mkdtempSync(path.join(os.tmpdir(), "brine-kdb-"));
}

test("SortedIds applies additions and removals in order and leaves earlier snapshots unchanged", () => {
  const cases: { start: string[]; changes: [string, boolean][]; want: string[] }[] = [
    { start: [], changes: [["b", true], ["a", true], ["c", true]], want: ["a", "b", "c"] },
    { start: ["a", "b", "c"], changes: [["b", false]], want: ["a", "c"] },
    { start: ["a", "c"], changes: [["b", true], ["b", true]], want: ["a", "b", "c"] },
    { start: ["a"], changes: [["z", false], ["a", false], ["a", true]], want: ["a"] },
    { start: ["m-10", "m-2"], changes: [["m-1", true], ["M-0", true]], want: ["M-0", "m-1", "m-10", "m-2"] },
  ];
  for (const c of cases) {
    const s = new SortedIds();
    s.reset(c.start);
    const before = s.ids;
    s.apply(c.changes);
    assert.deepEqual(s.ids, c.want, JSON.stringify(c));
    assert.deepEqual(before, [...c.start].sort(), "the earlier snapshot is untouched");
    assert.deepEqual(s.ids, [...c.want].sort(), "the same order as Array.prototype.sort");
  }
});

test("a reader's listing follows another handle's writes change by change, and the same array while nothing changed", async () => {
  const dir = tmp();
  try {
    const writer = new KeyDb(keyDbDir(dir));
    const reader = new KeyDb(keyDbDir(dir));
    writer.put("accepted", "m1", PUB("1"));
    writer.put("accepted", "m3", PUB("3"));
    await nextTurn();
    const first = reader.ids("accepted");
    assert.deepEqual(first, ["m1", "m3"]);
    assert.equal(reader.ids("accepted"), first, "unchanged generation: the same array, no scan");
    const gen = reader.generation();
    writer.put("pending", "m2", PUB("2"));
    writer.move("pending", "accepted", "m2");
    writer.remove("accepted", "m1");
    await nextTurn();
    assert.equal(reader.generation(), gen + 4, "one generation per key changed (a move changes two)");
    assert.deepEqual(reader.ids("accepted"), ["m2", "m3"]);
    assert.deepEqual(reader.ids("pending"), []);
    assert.deepEqual(first, ["m1", "m3"], "a caller's earlier listing is not modified");
    assert.equal(reader.get("accepted", "m2")?.sha256, pubDigest(PUB("2")));
    await writer.close();
    await reader.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a write by another process is seen by the next listing", async () => {
  const dir = tmp();
  try {
    const reader = new KeyDb(keyDbDir(dir));
    assert.deepEqual(reader.ids("accepted"), []);
    const mod = new URL("../../src/lib/pki/key-db.js", import.meta.url).href;
    const script = `import(${JSON.stringify(mod)}).then(async ({ KeyDb }) => { const d = new KeyDb(${JSON.stringify(keyDbDir(dir))}); d.put("accepted", "other", "k"); d.put("denied", "other", "k2"); await d.close(); })`;
    execFileSync(process.execPath, ["-e", script]);
    await nextTurn();
    assert.deepEqual(reader.ids("accepted"), ["other"]);
    assert.deepEqual(reader.ids("denied"), ["other"]);
    execFileSync(process.execPath, ["-e", script.replace('d.put("accepted", "other", "k"); d.put("denied", "other", "k2");', 'd.remove("accepted", "other");')]);
    await nextTurn();
    assert.deepEqual(reader.ids("accepted"), []);
    await reader.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a reader further behind than the change log reloads the state and still lists it exactly", async () => {
  const dir = tmp();
  try {
    const limits = { kept: 8, applied: 4 };
    const writer = new KeyDb(keyDbDir(dir), Date.now, limits);
    const reader = new KeyDb(keyDbDir(dir), Date.now, limits);
    writer.put("accepted", "a", "k");
    await nextTurn();
    assert.deepEqual(reader.ids("accepted"), ["a"]);
    for (let i = 0; i < 30; i++) writer.put("accepted", `n${String(i).padStart(2, "0")}`, "k");
    writer.remove("accepted", "a");
    await nextTurn();
    const want = Array.from({ length: 30 }, (_, i) => `n${String(i).padStart(2, "0")}`);
    assert.deepEqual(reader.ids("accepted"), want);
    const raw = open({ path: keyDbDir(dir), maxDbs: 4, readOnly: true });
    const logged = [...raw.openDB<string, number>({ name: "changes", encoding: "cbor" as unknown as "msgpack" }).getKeys({})];
    assert.deepEqual(logged, [25, 26, 27, 28, 29, 30, 31, 32], "the change log keeps the last `kept` changes");
    await raw.close();
    // a small step after that is applied from the log
    writer.remove("accepted", "n00");
    await nextTurn();
    assert.deepEqual(reader.ids("accepted"), want.slice(1));
    await writer.close();
    await reader.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("KeyStore on mmap_key keeps the file layout's meanings and leaves the key directories alone", async () => {
  const dir = tmp();
  try {
    const ks = new KeyStore(dir, "mmap_key");
    ks.ensureDirs();
    assert.equal(existsSync(path.join(dir, "minions")), false, "no key directories with the indexed store");
    assert.equal(existsSync(path.join(dir, "minions_autosign")), true, "autosign stubs stay files");
    ks.write("pending", "m", PUB("m"));
    ks.write("denied", "m", PUB("other"));
    assert.deepEqual(ks.statesOf("m"), ["pending", "denied"]);
    ks.move("pending", "accepted", "m");
    assert.equal(ks.read("accepted", "m"), PUB("m"));
    assert.equal(ks.exists("pending", "m"), false);
    assert.equal(ks.isDirectory("pending", "m"), false);
    assert.throws(() => ks.move("pending", "accepted", "m"), (e: NodeJS.ErrnoException) => e.code === "ENOENT");
    assert.equal(ks.digest("accepted", "m"), pubDigest(PUB("m")));
    assert.equal(ks.remove("accepted", "m"), true);
    assert.equal(ks.remove("accepted", "m"), false);
    assert.throws(() => ks.write("accepted", "../x", "k"), (e) => isBrineError(e, "BAD_ID"));
    assert.deepEqual(ks.list("accepted"), []);
    await closeKeyDbs();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("keys.cache_driver: mmap_key is refused on a network filesystem and warns when its store is empty beside key files", async () => {
  const dir = tmp();
  try {
    const cfg = { pki_dir: dir, cluster_pki_dir: null, cluster_id: null, "keys.cache_driver": "mmap_key" };
    assert.equal(keyCacheDriver(cfg), "mmap_key");
    assert.equal(keyCacheDriver({}), "localfs_key");
    assert.throws(() => prepareKeyStore(cfg, () => true), (e) => isBrineError(e, "KEYS_STORE_NETWORK_FS"));
    const files = new KeyStore(dir);
    files.ensureDirs();
    files.write("accepted", "old", PUB("old"));
    assert.match(prepareKeyStore(cfg, () => false) ?? "", /store in .*brine-keys is empty while .* holds 1 key files: run "salt-run pki.migrate_to_mmap"/);
    new KeyStore(dir, "mmap_key").write("accepted", "old", PUB("old"));
    assert.equal(prepareKeyStore(cfg, () => false), undefined, "a store with keys: nothing to say");
    assert.equal(prepareKeyStore({ ...cfg, "keys.cache_driver": "localfs_key" }, () => true), undefined, "files may live anywhere");
    await closeKeyDbs();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const shared of [false, true])
  test(`the accepted-key cache drops a key the indexed store no longer holds at the next request, with no time passing (${shared ? "shared table" : "own copies"})`, async () => {
  const dir = tmp();
  try {
    const ks = new KeyStore(dir, "mmap_key");
    ks.write("accepted", "m", PUB("m"));
    const cache = new AcceptedKeyCache(ks, 1000, 16, () => 5000, undefined, shared ? new KeyTable(KeyTable.create(16)) : undefined);
    assert.equal(cache.get("m")?.pem, cleanKey(PUB("m")));
    const other = new KeyDb(keyDbDir(dir)); // another process's handle
    other.remove("accepted", "m");
    await nextTurn();
    assert.equal(cache.get("m")?.pem, undefined, "deleted: gone although the 1 s window has not passed");
    other.put("accepted", "m", PUB("new"));
    await nextTurn();
    assert.equal(cache.get("m")?.pem, cleanKey(PUB("new")), "replaced: the new key at once");
    const files = new KeyStore(path.join(dir, "f"));
    files.ensureDirs();
    files.write("accepted", "m", PUB("m"));
    let now = 0;
    const fileCache = new AcceptedKeyCache(files, 1000, 16, () => now, undefined, shared ? new KeyTable(KeyTable.create(16)) : undefined);
    assert.equal(fileCache.get("m")?.pem, cleanKey(PUB("m")));
    files.remove("accepted", "m");
    assert.equal(fileCache.get("m")?.pem, cleanKey(PUB("m")), "files: kept for the window");
    now = 1000;
    assert.equal(fileCache.get("m")?.pem, undefined, "files: re-read after it");
    await other.close();
    await closeKeyDbs();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
