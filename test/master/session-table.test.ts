/**
 * The master's session table (src/shared/session-table.ts): the request threads share each minion's session key
 * and its file's last check, so a thread keeps a bounded set of entries and builds any other from the table
 * without reading the minion's file.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { SessionTable, sessionIdBytesMax } from "../../src/shared/session-table.js";
import { SessionKeys, sessionEntriesWithTableMax } from "../../src/lib/store/sessions.js";
import { generateKeyString } from "../../src/shared/protocol/crypticle.js";

test("a session table stores and returns each minion's record, ids of any script included, and refuses what it cannot hold", () => {
  const t = new SessionTable(SessionTable.create(300));
  const recs = new Map<string, { key: string; mtimeMs: number; ino: number; checkedAt: number }>();
  const ids = Array.from({ length: 250 }, (_, i) => (i % 3 === 0 ? `mïnion-${i}.例え.jp` : `minion-${i}`));
  for (const [i, id] of ids.entries()) {
    const r = { key: generateKeyString(), mtimeMs: 1_790_000_000_000 + i + 0.5, ino: 1000 + i, checkedAt: 1_790_000_000_500 + i };
    recs.set(id, r);
    assert.equal(t.write(id, r), true, id);
  }
  for (const id of ids) assert.deepEqual(t.read(id), recs.get(id), id);
  assert.equal(t.used, 250);
  assert.equal(t.read("never-stored"), undefined);
  assert.equal(t.read("minion-1 "), undefined, "an id is compared whole");
  const long = "x".repeat(sessionIdBytesMax + 1);
  assert.equal(t.write(long, recs.get(ids[1]!)!), false, "an id longer than a slot holds is not stored");
  assert.equal(t.read(long), undefined);
  assert.equal(t.write("é".repeat(sessionIdBytesMax / 2 + 1), recs.get(ids[1]!)!), false, "the bound is on UTF-8 bytes");
  assert.equal(t.write("bad-key", { key: "not base64 of 56 bytes", mtimeMs: 1, ino: 1, checkedAt: 1 }), false);
  // a newer record replaces the older one in place
  const newer = { key: generateKeyString(), mtimeMs: 1_790_000_100_000, ino: 7, checkedAt: 1_790_000_100_001 };
  assert.equal(t.write(ids[5]!, newer), true);
  assert.deepEqual(t.read(ids[5]!), newer);
  assert.equal(t.used, 250);
  for (let i = 0; i < 50; i++) t.write(`more-${i}`, newer);
  assert.equal(t.full, true);
  assert.equal(t.write("one-too-many", newer), false, "a full table refuses a new minion");
  assert.equal(t.read("one-too-many"), undefined);
  assert.deepEqual(t.read(ids[7]!), recs.get(ids[7]!), "and keeps serving the ones it holds");
});

test("threads writing the same minions' records at once never let a reader see half of one", async () => {
  const sab = SessionTable.create(64);
  const mod = new URL("../../src/shared/session-table.js", import.meta.url).href;
  // each record's mtime, ino and check time are derived from its key: a torn read would not match
  const code = `
    import { workerData, parentPort } from "node:worker_threads";
    import { randomBytes } from "node:crypto";
    const { SessionTable } = await import(workerData.mod);
    const t = new SessionTable(workerData.sab);
    const sum = (k) => Buffer.from(k, "base64").reduce((s, b) => s + b, 0);
    let torn = 0, reads = 0, writes = 0;
    const end = Date.now() + 600;
    while (Date.now() < end) {
      for (let i = 0; i < 32; i++) {
        const id = "m" + i;
        if ((i + workerData.n) % 2) {
          const key = randomBytes(56).toString("base64");
          const s = sum(key);
          if (t.write(id, { key, mtimeMs: s, ino: s * 3, checkedAt: s * 7 })) writes++;
        } else {
          const r = t.read(id);
          if (!r) continue;
          reads++;
          const s = sum(r.key);
          if (r.mtimeMs !== s || r.ino !== s * 3 || r.checkedAt !== s * 7) torn++;
        }
      }
    }
    parentPort.postMessage({ torn, reads, writes });`;
  const run = (n: number) =>
    new Promise<{ torn: number; reads: number; writes: number }>((resolve, reject) => {
      const w = new Worker(code, { eval: true, workerData: { mod, sab, n } });
      w.once("message", resolve);
      w.once("error", reject);
    });
  const results = await Promise.all([0, 1, 2, 3].map(run));
  assert.equal(results.reduce((s, r) => s + r.torn, 0), 0, JSON.stringify(results));
  assert.ok(results.reduce((s, r) => s + r.reads, 0) > 1000 && results.reduce((s, r) => s + r.writes, 0) > 1000, JSON.stringify(results));
  assert.equal(new SessionTable(sab).used, 32, "one slot per minion whichever thread stored it first");
});

test("a request thread takes a minion's session key from the table another thread filled, without reading the key file", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-sess-table-"));
  let clock = 1_790_000_000_000;
  const sab = SessionTable.create(1000);
  const a = new SessionKeys(dir, 86400, () => clock, new SessionTable(sab));
  const b = new SessionKeys(dir, 86400, () => clock, new SessionTable(sab));
  const key = a.get("m1").key;
  // the file now says otherwise, same inode and mtime: only a thread that reads it would see the change
  const file = path.join(dir, "sessions", "m1");
  const st = statSync(file);
  const other = generateKeyString();
  writeFileSync(file, other);
  utimesSync(file, st.atime, st.mtime);
  assert.equal(statSync(file).ino, st.ino);
  clock += 500;
  assert.equal(b.find("m1")?.key, key, "a request on thread b is opened with the key thread a checked half a second ago");
  const noTable = new SessionKeys(dir, 86400, () => clock);
  assert.equal(noTable.get("m1").key, other, "(a thread without the table reads the file)");
  // the shared check is a second old: the next thread to ask reads the file, and the others follow it
  clock += 600;
  assert.equal(b.find("m1")?.key, other);
  assert.equal(a.find("m1")?.key, other, "thread a, whose own check is 1.1 s old, takes b's newer one from the table");
  rmSync(dir, { recursive: true, force: true });
});

test("with the table a thread keeps a bounded number of session entries and rebuilds the others from it", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-sess-table-"));
  const clock = 1_790_000_000_000;
  const table = new SessionTable(SessionTable.create(5000));
  const s = new SessionKeys(dir, 86400, () => clock, table);
  const n = sessionEntriesWithTableMax + 200;
  const keys = Array.from({ length: n }, (_, i) => s.get(`m${i}`).key);
  assert.equal(s.entries, sessionEntriesWithTableMax);
  assert.equal(table.used, n);
  for (let i = 0; i < n; i++) assert.equal(s.find(`m${i}`)?.key, keys[i], `m${i}`);
  for (let i = 0; i < n; i += 97) assert.equal(readFileSync(path.join(dir, "sessions", `m${i}`), "latin1").trim(), keys[i]);
  assert.equal(s.entries, sessionEntriesWithTableMax);
  rmSync(dir, { recursive: true, force: true });
});
