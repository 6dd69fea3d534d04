/**
 * Property-based fuzzing (fast-check, bounded runs) of what a peer master's bytes go through here: forwarded
 * event and publish batches (their verified list and nonces), cache-sync records (job, return and token records
 * included), pull requests and replies, packed nonces, the nonce journal's files and nonce owner asks. Nothing throws, nothing
 * malformed is stored, and what is accepted checks out again.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import fc from "fast-check";
import { Encoder } from "cbor-x";
import { checkEventBody, ClusterForwarder, EVENT_CHANNEL, PUBLISH_CHANNEL } from "../../src/main-thread/cluster/forwarding.js";
import { checkRecord, decodeRecords, encodeRecords } from "../../src/shared/sync-records.js";
import { decodePull, encodePull, SyncStore } from "../../src/workers/state-sync/sync-store.js";
import { NonceSet } from "../../src/shared/nonce-set.js";
import { NonceJournal } from "../../src/shared/nonce-journal.js";
import { NONCE_FRESH, NONCE_SEEN, NONCE_UNDECIDED, badAsk, decideAsk, takeAnswer } from "../../src/shared/nonce-owner.js";
import { replayWindowMs } from "../../src/workers/req-handler/replay-window.js";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { packEvent } from "../../src/shared/event-frame.js";

const cbor = new Encoder({ mapsAsObjects: true, useRecords: false, tagUint8Array: false });
const RUNS = 300;
const NOW = Date.UTC(2026, 10, 25);

/** maps shaped like the records and envelopes, with every field sometimes wrong */
const jid = fc.oneof(fc.constant("20261125120000000000"), fc.stringMatching(/^\d{18,22}$/), fc.string());
const minionId = fc.oneof(fc.constantFrom("m1", "web-1", "a/b", "..", ""), fc.string());
const tokenHex = fc.oneof(fc.constant("ab".repeat(32)), fc.string());
/** an eauth token's data (a `tok` record's v), with every field sometimes wrong */
const tokenData = fc.record(
  {
    token: tokenHex,
    start: fc.oneof(fc.constant(NOW / 1000), fc.double()),
    expire: fc.oneof(fc.constant(NOW / 1000 + 60), fc.double()),
    name: fc.string(),
    eauth: fc.oneof(fc.constant("pam"), fc.string()),
    groups: fc.oneof(fc.array(fc.string()), fc.anything()),
    auth_list: fc.oneof(fc.array(fc.anything()), fc.anything()),
  },
  { requiredKeys: [] },
);
const recordish = fc.record(
  {
    k: fc.constantFrom("data", "mine", "sess", "job", "ret", "nonce", "tok", "v3", "x"),
    b: fc.oneof(fc.uint8Array({ maxLength: 40 }), fc.anything()),
    id: minionId,
    jid,
    t: fc.oneof(fc.integer(), fc.double(), fc.constant(NOW)),
    o: fc.string(),
    v: fc.oneof(fc.constant(null), fc.dictionary(fc.string(), fc.anything()), fc.record({ return: fc.anything() }), tokenData, fc.anything()),
    m: fc.oneof(fc.array(minionId), fc.anything()),
    key: fc.string(),
    token: tokenHex,
    x: fc.oneof(fc.double(), fc.constant(NOW / 1000 + 60)),
  },
  { requiredKeys: [] },
);

test("forwarded batches: any bytes or envelope shape are refused or delivered, never thrown on; only valid verified indices reach the mirror", () => {
  const frame = packEvent("salt/job/20261125120000000000/ret/m1", { return: true });
  const envelope = fc.record(
    {
      o: fc.oneof(fc.constant("a"), fc.string()),
      i: fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.anything()),
      s: fc.oneof(fc.integer({ min: 1, max: 1_000_000 }), fc.anything()),
      f: fc.oneof(fc.array(fc.oneof(fc.constant(frame), fc.uint8Array({ maxLength: 64 })), { maxLength: 8 }), fc.anything()),
      v: fc.oneof(fc.array(fc.integer({ min: -2, max: 10 }), { maxLength: 8 }), fc.anything()),
      n: fc.oneof(fc.uint8Array({ maxLength: 80 }), fc.anything()),
      l: fc.oneof(fc.uint8Array({ maxLength: 64 }), fc.anything()),
      p: fc.oneof(fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 4 }), fc.anything()),
    },
    { requiredKeys: [] },
  );
  const payload = fc.oneof(fc.uint8Array({ maxLength: 256 }), envelope.map((e) => cbor.encode(e) as Uint8Array));
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.constantFrom(EVENT_CHANNEL, PUBLISH_CHANNEL), payload), { maxLength: 6 }), (msgs) => {
      const handlers = new Map<string, (m: { from: string; payload: Uint8Array }) => unknown>();
      let mirrored = 0;
      let nonceBytes = 0;
      new ClusterForwarder(
        "b",
        { send: () => undefined, upPeers: () => ["a"], on: (c, h) => (handlers.set(c, h), () => undefined) },
        {
          events: () => undefined,
          // what reaches the publisher thread has the shapes it relies on (it decodes the loads, checks each frame)
          publishes: (_from, l, p) => assert.ok(l instanceof Uint8Array && (p === undefined || (Array.isArray(p) && p.every((f) => f instanceof Uint8Array)))),
          mirror: (f) => (mirrored += f.length),
          nonces: (n) => (nonceBytes += n.byteLength),
        },
      );
      for (const [channel, p] of msgs) handlers.get(channel)!({ from: "a", payload: p });
      assert.ok(nonceBytes % 8 === 0);
      return mirrored >= 0;
    }),
    { numRuns: RUNS },
  );
  fc.assert(
    fc.property(fc.record({ f: fc.anything(), v: fc.anything(), n: fc.anything() }, { requiredKeys: [] }), (env) => {
      const r = checkEventBody(env);
      if (typeof r === "string") return true;
      return r.verified.every((i, k) => Number.isSafeInteger(i) && i >= 0 && i < r.frames.length && (k === 0 || i > r.verified[k - 1]!));
    }),
    { numRuns: RUNS },
  );
});

test("cache-sync records and pull requests: any shape is refused with a reason or accepted as a record that checks out again", () => {
  fc.assert(
    fc.property(fc.oneof(fc.array(fc.oneof(recordish, fc.anything()), { maxLength: 6 }), fc.anything()), (raw) => {
      let bytes: Uint8Array;
      try {
        bytes = cbor.encode(raw) as Uint8Array;
      } catch {
        return true;
      }
      const d = decodeRecords(bytes, NOW);
      for (const r of d.records) assert.deepEqual(checkRecord(r, NOW), r, "an accepted record is accepted again as it is");
      const again = decodeRecords(encodeRecords(d.records), NOW);
      assert.equal(again.refused, 0);
      return true;
    }),
    { numRuns: RUNS },
  );
  fc.assert(
    fc.property(fc.oneof(fc.uint8Array({ maxLength: 64 }), fc.anything().map((x) => { try { return cbor.encode(x) as Uint8Array; } catch { return new Uint8Array(); } })), (b) => {
      const r = decodePull(b);
      if (typeof r !== "string") assert.ok(["data", "mine", "sess", "v3", "tok", "job", "ret", "nonce"].includes(r.cursor.bank) && r.since >= 0 && (r.jobsSince === undefined || r.jobsSince >= 0));
      return true;
    }),
    { numRuns: RUNS },
  );
});

test("pull replies from a peer: any bytes are refused with a reason or stored as checked records, never thrown on", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-fz-"));
  const cfg = { ...masterDefaults(), cachedir: dir };
  const store = openStore(cfg);
  try {
    const sync = new SyncStore(cfg, store, "me", () => NOW, new NonceSet(1024));
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ maxLength: 128 }),
          fc.record({ b: fc.array(recordish, { maxLength: 4 }).map((r) => cbor.encode(r) as Uint8Array), n: fc.anything(), next: fc.oneof(fc.constant(null), fc.record({ bank: fc.constantFrom("data", "v3", "tok", "job", "ret", "nonce", "zz"), after: fc.anything() }, { requiredKeys: ["bank"] }), fc.anything()), error: fc.anything() }, { requiredKeys: [] }).map((x) => cbor.encode(x) as Uint8Array),
        ),
        async (reply) => {
          const r = await sync.applyChunk("peer", reply);
          return "error" in r ? typeof r.error === "string" : r.n >= 0;
        },
      ),
      { numRuns: 150 },
    );
    // a peer's pull request with any cursor position: answered (records or an error), never thrown on
    fc.assert(
      fc.property(fc.constantFrom("data", "mine", "sess", "v3", "tok", "job", "ret", "nonce"), fc.oneof(fc.string(), fc.stringMatching(/^\d{1,3}:\d{1,5}$/)), fc.option(fc.nat()), (bank, after, jobsSince) => {
        const out = sync.serve(encodePull({ cursor: { bank, after }, since: 0, nonces: true, tokens: true, v3: true, ...(jobsSince !== null ? { jobsSince } : {}) }));
        return out instanceof Uint8Array;
      }),
      { numRuns: RUNS },
    );
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("packed nonces and nonce journal files: any bytes are read as far as they are valid, never thrown on", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 200 }), (b) => {
      const set = new NonceSet(1024);
      const added = set.insertPacked(b);
      return added >= 0 && added <= Math.floor(b.byteLength / 8);
    }),
    { numRuns: RUNS },
  );
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-fzn-"));
  try {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 20 }), fc.uint8Array({ maxLength: 80 })), { maxLength: 3 }), (files) => {
        for (const [g, body] of files) writeFileSync(path.join(dir, `nonces.${g}`), body);
        const j = new NonceJournal(dir, new NonceSet(1024), replayWindowMs, () => NOW);
        const n = j.load();
        j.close();
        return n >= 0;
      }),
      { numRuns: 100 },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("nonce owner asks and answers (cl/nonce): any bytes are refused with a reason or decided one verdict per nonce, never thrown on", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 200 }), fc.uint8Array({ maxLength: 40 }), (ask, answer) => {
      const set = new NonceSet(1024);
      const why = badAsk(ask);
      if (why === undefined) {
        const v = decideAsk(ask, (hi, lo) => set.insertWords(hi, lo));
        if (v.length !== ask.byteLength / 8 || !v.every((x) => x === NONCE_SEEN || x === NONCE_FRESH)) return false;
      } else if (ask.byteLength % 8 === 0 && ask.byteLength > 0) return false;
      // an asker takes a peer's answer whole or not at all
      const verdicts = new Uint8Array(5).fill(NONCE_UNDECIDED);
      const bad = takeAnswer(verdicts, [0, 2, 4], answer);
      return bad === undefined ? verdicts[1] === NONCE_UNDECIDED && verdicts[3] === NONCE_UNDECIDED && answer.length === 3 : verdicts.every((x) => x === NONCE_UNDECIDED);
    }),
    { numRuns: RUNS },
  );
});
