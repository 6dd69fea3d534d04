/**
 * The master's table of accepted keys (src/shared/key-table.ts), sans I/O: what a record keeps, when its tag
 * changes, what a drop does, and what the table answers when it cannot hold a key. Across real threads: readers
 * never see half a record while writers change it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import { KeyTable, KeyView, keyIdBytesMax, type KeyRecord } from "../../src/shared/key-table.js";

const rec = (text: string, over: Partial<KeyRecord> = {}): KeyRecord => ({ text, readAt: 1_000, gen: NaN, dirMtime: 500, file: { ino: 7, size: text.length, mtimeMs: 400, ctimeMs: 400 }, ...over });
const PEM = (body: string) => `-----BEGIN PUBLIC KEY-----\n${body}\n-----END PUBLIC KEY-----`;

test("a record answers what was put: its text, its state, its file's identity, and the same tag for the same text", () => {
  const t = new KeyTable(KeyTable.create(16));
  const v = new KeyView();
  assert.equal(t.look("m1", v), false, "nothing stored yet");
  const tag = t.put("m1", rec(PEM("a".repeat(300))));
  assert.ok(tag > 0);
  assert.equal(t.look("m1", v), true);
  assert.equal(t.text(v), PEM("a".repeat(300)));
  assert.deepEqual([v.tag, v.readAt, v.dirMtime, v.ino, v.size, v.mtimeMs, v.ctimeMs], [tag, 1_000, 500, 7, PEM("a".repeat(300)).length, 400, 400]);
  assert.ok(Number.isNaN(v.gen));
  assert.equal(t.put("m1", rec(PEM("a".repeat(300)), { readAt: 2_000, file: undefined, gen: 4, dirMtime: NaN })), tag, "same text: same tag");
  assert.equal(t.look("m1", v), true);
  assert.deepEqual([v.readAt, v.gen], [2_000, 4]);
  assert.ok(Number.isNaN(v.ino) && Number.isNaN(v.dirMtime), "no file identity, no vouched mtime: none answered");
  const other = t.put("m1", rec(PEM("b".repeat(300))));
  assert.ok(other > 0 && other !== tag, "another text: another tag");
  assert.equal(t.look("m1", v) && t.text(v), PEM("b".repeat(300)));
  assert.equal(t.look("m2", v), false, "another id");
  const utf8 = "mïnion-ü";
  t.put(utf8, rec("ключ"));
  assert.equal(t.look(utf8, v) && t.text(v), "ключ", "UTF-8 ids and text");
});

test("a verified tok is kept with its key's text: the exact bytes, only under the tag it was verified with, gone when the text changes", () => {
  const t = new KeyTable(KeyTable.create(16));
  const v = new KeyView();
  const tag = t.put("m1", rec(PEM("a".repeat(400))));
  const tok = Buffer.from(Array.from({ length: 256 }, (_, i) => i)); // every byte value
  t.look("m1", v);
  assert.equal(t.tokIs(v, tok), false, "none verified yet");
  assert.equal(t.setTok("m1", tag + 1000, tok), false, "verified against another text: not kept");
  assert.equal(t.setTok("m1", tag, tok), true);
  t.look("m1", v);
  assert.equal(t.tokIs(v, Buffer.from(tok)), true, "the same bytes in another Buffer");
  const inFrame = Buffer.concat([Buffer.from("head"), tok, Buffer.from("tail")]);
  assert.equal(t.tokIs(v, inFrame.subarray(4, 4 + 256)), true, "a view into a request frame");
  const flipped = Buffer.from(tok);
  flipped[255]! ^= 1;
  assert.equal(t.tokIs(v, flipped), false, "one bit differs");
  assert.equal(t.tokIs(v, tok.subarray(0, 255)), false, "a prefix");
  assert.equal(t.put("m1", rec(PEM("a".repeat(400)), { readAt: 5_000 })), tag, "re-read, same text");
  t.look("m1", v);
  assert.equal(t.tokIs(v, tok), true, "a re-read of the same text keeps the tok");
  t.put("m1", rec(PEM("c".repeat(400))));
  t.look("m1", v);
  assert.equal(t.tokIs(v, tok), false, "a new key: the tok verified against the old one is gone");
  assert.equal(t.setTok("m1", tag, tok), false, "and the old tag cannot put it back");
  assert.equal(t.setTok("m1", v.tag, Buffer.alloc(2049)), false, "a tok longer than the record's room is not kept");
});

test("a longer text moves to a new record: a reader holding the old one gets nothing from it, a new look finds the new one", () => {
  const t = new KeyTable(KeyTable.create(16));
  const old = new KeyView();
  t.put("m1", rec(PEM("a".repeat(100))));
  t.put("m2", rec(PEM("z".repeat(100))));
  assert.equal(t.look("m1", old), true);
  const used = t.usedBytes;
  const tag = t.put("m1", rec(PEM("b".repeat(900))));
  assert.ok(tag > 0 && t.usedBytes > used, "a new record");
  assert.equal(t.text(old), undefined, "the view of the old record: changed since");
  const v = new KeyView();
  assert.equal(t.look("m1", v) && t.text(v), PEM("b".repeat(900)));
  assert.equal(v.tag, tag);
  assert.equal(t.look("m2", v) && t.text(v), PEM("z".repeat(100)), "the neighbour untouched");
  assert.equal(t.put("m1", rec(PEM("c".repeat(100)))) > 0, true, "a shorter text fits the new record in place");
  assert.equal(t.look("m1", v) && t.text(v), PEM("c".repeat(100)));
});

test("a drop makes every reader read again until the next put; dropAll does it for every record", () => {
  const t = new KeyTable(KeyTable.create(16));
  const v = new KeyView();
  const tag = t.put("m1", rec(PEM("a".repeat(50))));
  t.put("m2", rec(PEM("b".repeat(50))));
  t.drop("m1");
  t.drop("absent"); // nothing to drop: no error
  assert.equal(t.look("m1", v), false);
  assert.equal(t.look("m2", v), true, "only that id");
  assert.equal(t.put("m1", rec(PEM("a".repeat(50)))), tag, "read again, same text: back, same tag");
  assert.equal(t.look("m1", v), true);
  t.dropAll();
  assert.equal(t.look("m1", v) || t.look("m2", v), false, "every record");
  t.put("m2", rec(PEM("b".repeat(50))));
  assert.equal(t.look("m2", v), true, "a put after dropAll is good again");
  assert.equal(t.look("m1", v), false, "the others still wait for theirs");
});

test("what the table cannot hold is answered 0 (the thread keeps its own copy): an id too long, an arena full", () => {
  const t = new KeyTable(KeyTable.create(2)); // 3,072 bytes of arena
  const v = new KeyView();
  assert.equal(t.put("x".repeat(keyIdBytesMax + 1), rec("k")), 0, "an id over 120 bytes");
  assert.equal(t.put("é".repeat(61), rec("k")), 0, "over 120 bytes of UTF-8 in 61 characters");
  assert.equal(t.look("x".repeat(keyIdBytesMax + 1), v), false);
  let stored = 0;
  for (let i = 0; i < 10; i++) if (t.put(`m${i}`, rec(PEM("a".repeat(600)))) > 0) stored++;
  assert.ok(stored >= 2 && stored < 10, `${stored} of 10 stored`);
  assert.ok(t.usedBytes <= 3072);
  assert.equal(t.look("m9", v), false, "past the arena: absent");
  assert.equal(t.look("m0", v) && t.text(v), PEM("a".repeat(600)), "what was stored before still answers");
  // a stored key whose new text needs a new record that does not fit: dropped, so no thread uses the old text
  assert.equal(t.put("m0", rec(PEM("b".repeat(1200)))), 0);
  assert.equal(t.look("m0", v), false);
  assert.throws(() => KeyTable.create(0), RangeError);
  assert.throws(() => new KeyTable(new SharedArrayBuffer(1024)), /not a key table/);
});

test("across threads: readers never see a torn record while two writer threads change the same keys", { timeout: 60_000 }, async () => {
  const sab = KeyTable.create(64);
  const ids = ["a", "b", "c", "d"];
  // texts of three lengths (so records move), each a function of (writer, round): a reader checks its text is whole
  const code = `
    const { workerData, parentPort } = require("node:worker_threads");
    import(workerData.mod).then(({ KeyTable, KeyView }) => {
      const t = new KeyTable(workerData.sab);
      const v = new KeyView();
      const ids = ${JSON.stringify(ids)};
      const text = (w, r) => (w + ":" + r + ":").repeat(1 + (r % 3) * 40);
      let bad = 0, seen = 0;
      const end = Date.now() + 1500;
      for (let r = 0; Date.now() < end; r++) {
        for (const id of ids) {
          if (workerData.writer >= 0) t.put(id, { text: text(workerData.writer, r), readAt: r, gen: NaN, dirMtime: NaN, file: undefined });
          if (t.look(id, v)) {
            const s = t.text(v);
            if (s === undefined) continue;
            seen++;
            const m = /^(\\d+):(\\d+):/.exec(s);
            if (!m || s !== text(Number(m[1]), Number(m[2]))) bad++;
          }
        }
      }
      parentPort.postMessage({ bad, seen });
    });`;
  const mod = new URL("../../src/shared/key-table.js", import.meta.url).href;
  const run = (writer: number) =>
    new Promise<{ bad: number; seen: number }>((resolve, reject) => {
      const w = new Worker(code, { eval: true, workerData: { sab, mod, writer } });
      w.once("message", resolve);
      w.once("error", reject);
    });
  const results = await Promise.all([run(0), run(1), run(-1)]);
  for (const r of results) assert.equal(r.bad, 0, `torn texts read: ${JSON.stringify(results)}`);
  assert.ok(results[2]!.seen > 0, "the reader thread read records");
  const v = new KeyView();
  const t = new KeyTable(sab);
  for (const id of ids) assert.equal(t.look(id, v), true, `${id} still answers after the storm`);
});
