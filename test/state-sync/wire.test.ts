/**
 * The state-sync replies' wire form (src/workers/state-sync/wire.ts): deflated for an asker that says `z: 1`, plain
 * CBOR otherwise, a deflated reply bounded when inflated; and what it buys: a keys-only join between two engines of
 * this build puts at most 1.05× the keys' bytes on the wire, the peer channel's framing and seal counted (it was
 * 1.24× before), while a puller that does not say `z` (an earlier version) still gets plain replies and the same keys.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { deflateRawSync } from "node:zlib";
import { cbor } from "../../src/shared/cbor.js";
import { closeKeyDbs } from "../../src/lib/pki/key-store.js";
import type { PeerReport } from "../../src/workers/state-sync/messages.js";
import { deflateMinBytes, deflateSampleBytes, packReply, replyInflatedBytesMax, unpackReply } from "../../src/workers/state-sync/wire.js";
import { DATA_OVERHEAD_BYTES, encodeBody, BODY } from "../../src/workers/raft/peer/framing.js";
import { distinctMinionKeys } from "../../tools/distinct-keys.js";
import { relayEngines, startEngine, type EngineSide } from "../helpers/state-sync-pair.js";

const enc = (v: unknown) => cbor.encode(v) as Uint8Array;
const dec = (b: Uint8Array) => cbor.decode(b) as unknown;

test("a reply is deflated only for an asker that reads it, only when that pays, and reads back the same either way", () => {
  const keys = distinctMinionKeys(64);
  const batch = { pieces: keys.map((data) => ({ data })) };
  const rows: [string, unknown, boolean, "deflated" | "plain"][] = [
    ["a batch of keys, the asker reads deflated replies", batch, true, "deflated"],
    ["the same batch, an asker of an earlier version", batch, false, "plain"],
    ["a reply shorter than the floor", { same: true, entries: [], more: false }, true, "plain"],
    ["bytes that do not compress (random)", { pieces: [{ data: randomBytes(4096) }] }, true, "plain"],
    ["a long reply whose first 8 KiB do not compress is sent plain, the rest not tried", { pieces: [{ data: randomBytes(deflateSampleBytes) }, ...keys.map((data) => ({ data }))] }, true, "plain"],
    ["a long reply whose first 8 KiB compress", { pieces: [...keys.map((data) => ({ data })), { data: randomBytes(deflateSampleBytes) }] }, true, "deflated"],
  ];
  for (const [what, reply, z, want] of rows) {
    const bytes = packReply(reply, z);
    const outer = dec(bytes) as Record<string, unknown>;
    assert.equal(outer.z instanceof Uint8Array ? "deflated" : "plain", want, what);
    assert.deepEqual(unpackReply(bytes), dec(enc(reply)), `${what}: reads back the same`);
    if (want === "deflated") assert.ok(bytes.byteLength < enc(reply).byteLength * 0.9, `${what}: ${bytes.byteLength} against ${enc(reply).byteLength}`);
  }
  assert.ok(enc({ same: true, entries: [], more: false }).byteLength < deflateMinBytes);
});

test("a deflated reply that inflates past its bound, or does not inflate, is refused with a clear error; a reply with z beside other fields is not taken for a deflated one", () => {
  const bomb = enc({ z: deflateRawSync(Buffer.alloc(replyInflatedBytesMax + 1)) });
  assert.ok(bomb.byteLength < 64 * 1024, "a small reply");
  assert.throws(() => unpackReply(bomb), /inflates past 8388608 bytes/);
  assert.throws(() => unpackReply(enc({ z: new Uint8Array([1, 2, 3, 4, 5]) })), /does not inflate/);
  const page = { entries: [], more: false, z: new Uint8Array([1, 2]) };
  assert.deepEqual(unpackReply(enc(page)), dec(enc(page)));
});

/**
 * The puller's peer requests relayed to the server, the bytes counted as the peer channel sends them: each request
 * and reply in its body (channel, id) in a sealed frame of its own (one message a frame: the most framing the
 * channel adds). `oldPuller`: `z` is taken out of every request (a puller of an earlier version), and every reply's
 * form is recorded.
 */
function link(puller: EngineSide, server: EngineSide, oldPuller: boolean): { pull(channels: string[]): Promise<PeerReport>; wire: { bytes: number }; replies: ("deflated" | "plain")[] } {
  const wire = { bytes: 0 };
  const replies: ("deflated" | "plain")[] = [];
  const relay = relayEngines(puller, server, {
    request(p, rid) {
      if (oldPuller) {
        const { z: _z, ...rest } = dec(p) as Record<string, unknown>;
        p = enc(rest);
      }
      wire.bytes += encodeBody({ kind: BODY.REQ, channel: "cl/state-sync", id: rid, payload: p }).byteLength + DATA_OVERHEAD_BYTES;
      return p;
    },
    reply(p, rid) {
      replies.push((dec(p) as { z?: unknown }).z instanceof Uint8Array ? "deflated" : "plain");
      wire.bytes += encodeBody({ kind: BODY.RES, id: rid, payload: p }).byteLength + DATA_OVERHEAD_BYTES;
    },
  });
  return { wire, replies, pull: relay.pull };
}

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
function accepted(root: string): Record<string, string> {
  const dir = path.join(root, "pki", "minions");
  return Object.fromEntries(readdirSync(dir).filter((n) => !n.startsWith(".")).map((n) => [n, sha(readFileSync(path.join(dir, n)))]));
}

test("a keys-only join puts at most 1.05× the keys' bytes on the wire, framing and seal counted; a puller of an earlier version gets plain replies and the same keys", { timeout: 120_000 }, async (t) => {
  const top = mkdtempSync(path.join(os.tmpdir(), "brine-statesync-wire-"));
  const keys = distinctMinionKeys(600);
  const serverRoot = path.join(top, "server");
  mkdirSync(path.join(serverRoot, "pki", "minions"), { recursive: true });
  keys.forEach((k, i) => writeFileSync(path.join(serverRoot, "pki", "minions", `minion-${String(i).padStart(4, "0")}.example.org`), k));
  const content = keys.reduce((n, k) => n + k.byteLength, 0);
  const server = startEngine("server", serverRoot);
  try {
    for (const oldPuller of [false, true]) {
      const root = path.join(top, oldPuller ? "old-puller" : "puller");
      mkdirSync(path.join(root, "srv", "salt"), { recursive: true });
      const puller = startEngine(oldPuller ? "old-puller" : "puller", root);
      try {
        const l = link(puller, server, oldPuller);
        const r = await l.pull(["keys"]);
        assert.deepEqual([r.items, r.errors], [600, []], JSON.stringify(r));
        assert.deepEqual(accepted(root), accepted(serverRoot), "the same keys");
        const ratio = l.wire.bytes / content;
        t.diagnostic(`${oldPuller ? "plain replies" : "deflated replies"}: ${l.wire.bytes} bytes on the wire for ${content} of keys, ${ratio.toFixed(3)}×`);
        if (oldPuller) {
          assert.deepEqual([...new Set(l.replies)], ["plain"], "no deflated reply to a puller that did not ask for one");
          assert.ok(ratio > 1.2, `the plain form's ${ratio.toFixed(3)}× (its manifest entries and framing)`);
        } else {
          assert.ok(l.replies.includes("deflated"));
          assert.ok(ratio <= 1.05, `${l.wire.bytes} bytes on the wire for ${content} bytes of keys: ${ratio.toFixed(3)}×`);
        }
      } finally {
        await puller.close();
      }
    }
  } finally {
    await server.close();
    await closeKeyDbs();
    rmSync(top, { recursive: true, force: true });
  }
});
