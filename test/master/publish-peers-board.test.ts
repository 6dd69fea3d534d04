/**
 * The publish port's connected addresses, shared by the request threads (src/shared/publish-peers.ts): a burst of
 * publishes reads the kernel's tables once, not once per publish; a snapshot that would call a matched minion not
 * connected is trusted for a second only, one that sees everyone connected for ten; a transport's live feed
 * replaces the reads; a thread that died holding the writer lock does not stop the others; a minion's addresses
 * are read from its cached data once per ten seconds per thread, not decoded again for every publish.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { setImmediate as tick } from "node:timers/promises";
import {
  LivePublishPeers,
  livePeersWriteGapMsPerAddress,
  PublishPeersBoard,
  publishPeersBytesMax,
  publishPeersFreshMsMax,
  publishPeersLockSMax,
  publishPeersStaleMsMax,
  snapshotVerdict,
  type PeersVerdict,
} from "../../src/shared/publish-peers.js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { addressGrains, addressesKept, boardPeers, tcpSocketsInUse, minionAddressesEntriesMax, minionAddressesMsMax, notConnectedAtPublish } from "../../src/workers/req-handler/presence.js";
import { notConnectedMinionsMax } from "../../src/workers/req-handler/publish.js";
import { masterDefaults } from "../../src/shared/config/defaults.js";

/** the kernel's count of TCP sockets in use, unchanged between the reads of these tests */
const steady = () => 7;

test("when a thread may use the board's addresses and when it reads the kernel's tables", () => {
  const F = publishPeersFreshMsMax;
  const S = publishPeersStaleMsMax;
  const c = false;
  const table: [string, { live: boolean; hasSnapshot: boolean; ageMs: number; socketsChanged: boolean }, PeersVerdict][] = [
    ["nothing on the board", { live: false, hasSnapshot: false, ageMs: 0, socketsChanged: c }, "read"],
    ["a snapshot just read", { live: false, hasSnapshot: true, ageMs: 0, socketsChanged: c }, "use"],
    ["a snapshot at the fresh limit", { live: false, hasSnapshot: true, ageMs: F, socketsChanged: c }, "use"],
    ["past it: only if it sees everyone connected", { live: false, hasSnapshot: true, ageMs: F + 1, socketsChanged: c }, "use_if_all_connected"],
    ["at the stale limit", { live: false, hasSnapshot: true, ageMs: S, socketsChanged: c }, "use_if_all_connected"],
    ["past the stale limit", { live: false, hasSnapshot: true, ageMs: S + 1, socketsChanged: c }, "read"],
    ["a snapshot from the future (the clock went back)", { live: false, hasSnapshot: true, ageMs: -5, socketsChanged: c }, "read"],
    ["a fresh snapshot, but a TCP socket came or went since", { live: false, hasSnapshot: true, ageMs: 0, socketsChanged: true }, "read"],
    ["live addresses, however old the last change", { live: true, hasSnapshot: true, ageMs: 10 * S, socketsChanged: true }, "use"],
    ["live but too many to hold", { live: true, hasSnapshot: false, ageMs: 0, socketsChanged: c }, "read"],
  ];
  for (const [name, input, want] of table) assert.equal(snapshotVerdict(input), want, name);
});

test("one thread's snapshot is read by another thread's board on the same buffer, parsed once per write", () => {
  const a = new PublishPeersBoard(undefined, 1_000);
  const b = new PublishPeersBoard(a.sab);
  assert.equal(b.view().addrs, undefined, "an empty board says nothing");
  assert.ok(a.tryLock(1_000));
  assert.equal(a.writeSnapshot(["10.0.0.5", "::1"], 2_000), "stored");
  a.unlock();
  const v = b.view();
  assert.deepEqual([...v.addrs!].sort(), ["10.0.0.5", "::1"]);
  assert.equal(v.atMs, 2_000);
  assert.equal(v.live, false);
  assert.equal(b.view(), v, "unchanged board: the same parsed view");
  assert.ok(a.tryLock(1_000));
  a.writeSnapshot([], 3_000);
  a.unlock();
  assert.deepEqual([...b.view().addrs!], [], "nobody connected is an answer too");
});

test("the writer lock is held by one thread; one held past its limit (a thread that died) is taken over", () => {
  const a = new PublishPeersBoard(undefined, 0);
  const b = new PublishPeersBoard(a.sab);
  assert.ok(a.tryLock(500));
  assert.equal(b.tryLock(600), false, "held");
  assert.equal(b.tryLock(publishPeersLockSMax * 1000), false, "still within its limit");
  assert.ok(b.tryLock((publishPeersLockSMax + 2) * 1000), "taken over");
  assert.equal(a.tryLock((publishPeersLockSMax + 2) * 1000), false);
  b.unlock();
  assert.ok(a.tryLock((publishPeersLockSMax + 3) * 1000));
});

test("more addresses than the board holds: it says nothing, so each thread reads for itself", () => {
  const a = new PublishPeersBoard(undefined, 0);
  const many = Array.from({ length: Math.ceil(publishPeersBytesMax / 8) }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
  a.tryLock(0);
  assert.equal(a.writeSnapshot(many, 10), "too_many");
  a.unlock();
  assert.equal(a.view().addrs, undefined);
  let reads = 0;
  for (let i = 0; i < 3; i++) boardPeers(a, () => (reads++, new Set(many)), 20, undefined, steady);
  assert.equal(reads, 3);
});

test("a burst of publishes reads the kernel's tables once; the other threads use that read", () => {
  const t0 = 1_000_000;
  const boards = [new PublishPeersBoard(undefined, t0)];
  for (let i = 0; i < 3; i++) boards.push(new PublishPeersBoard(boards[0]!.sab));
  let reads = 0;
  const read = () => (reads++, new Set(["10.0.0.5"]));
  for (let i = 0; i < 40; i++) {
    const got = boardPeers(boards[i % 4]!, read, t0 + i * 20, () => true, steady);
    assert.deepEqual([...got], ["10.0.0.5"]);
  }
  assert.equal(reads, 1, "40 publishes over 800 ms, on four threads");
  // past the fresh limit a snapshot that sees everyone connected still answers; one that does not is read again
  boardPeers(boards[1]!, read, t0 + publishPeersFreshMsMax + 500, () => true, steady);
  assert.equal(reads, 1);
  boardPeers(boards[2]!, read, t0 + publishPeersFreshMsMax + 600, () => false, steady);
  assert.equal(reads, 2, "someone matched is not seen connected: read again before saying so");
  boardPeers(boards[3]!, read, t0 + publishPeersFreshMsMax + 700, () => false, steady);
  assert.equal(reads, 2, "the new read is fresh for the others");
  boardPeers(boards[3]!, read, t0 + publishPeersFreshMsMax + 600 + publishPeersStaleMsMax + 1, () => true, steady);
  assert.equal(reads, 3, "too old even for a publish whose minions it sees connected");
  // without a judge (presence events, manage.present's wheel twin) only a fresh snapshot answers
  boardPeers(boards[0]!, read, t0 + publishPeersFreshMsMax + 600 + publishPeersStaleMsMax + 1 + publishPeersFreshMsMax + 1, undefined, steady);
  assert.equal(reads, 4);
  // a minion connected or left (the kernel's count of TCP sockets moved): read again, however fresh the snapshot
  const t1 = t0 + publishPeersFreshMsMax + 600 + publishPeersStaleMsMax + 1 + publishPeersFreshMsMax + 1;
  boardPeers(boards[1]!, read, t1 + 1, () => true, () => 8);
  assert.equal(reads, 5);
  boardPeers(boards[2]!, read, t1 + 2, () => true, () => 8);
  assert.equal(reads, 5, "the new read carries the new count");
  boardPeers(boards[2]!, read, t1 + 3, () => true, () => NaN);
  assert.equal(reads, 6, "a count that cannot be read: read the tables every time");
});

test("a thread that cannot take the writer lock reads for itself and leaves the board alone", () => {
  const a = new PublishPeersBoard(undefined, 0);
  const b = new PublishPeersBoard(a.sab);
  assert.ok(a.tryLock(0));
  let reads = 0;
  assert.deepEqual([...boardPeers(b, () => (reads++, new Set(["10.0.0.7"])), 10, undefined, steady)], ["10.0.0.7"]);
  assert.equal(reads, 1);
  assert.equal(b.view().addrs, undefined, "not stored: another thread holds the lock");
});

test("a transport's live feed: counted per address, written once per turn, never overwritten by a snapshot, handed back on close", async () => {
  const board = new PublishPeersBoard(undefined, 0);
  const reader = new PublishPeersBoard(board.sab);
  const live = new LivePublishPeers(board, () => 5_000);
  live.connected("10.0.0.5");
  live.connected("::ffff:10.0.0.5"); // a second connection from the same host, as a dual-stack socket names it
  live.connected("2001:db8::9");
  assert.equal(reader.view().addrs, undefined, "not written before the turn ends");
  await tick();
  let v = reader.view();
  assert.equal(v.live, true);
  assert.deepEqual([...v.addrs!].sort(), ["10.0.0.5", "2001:db8::9"]);
  live.disconnected("10.0.0.5");
  await tick();
  assert.deepEqual([...reader.view().addrs!].sort(), ["10.0.0.5", "2001:db8::9"], "one connection from 10.0.0.5 is left");
  live.disconnected("::ffff:10.0.0.5");
  await tick();
  assert.deepEqual([...reader.view().addrs!], ["2001:db8::9"]);
  // a request thread never reads /proc while the feed is live, however long since the last change
  let reads = 0;
  assert.deepEqual([...boardPeers(reader, () => (reads++, new Set()), 5_000 + 10 * publishPeersStaleMsMax, undefined, () => NaN)], ["2001:db8::9"]);
  assert.equal(reads, 0);
  reader.tryLock(6_000);
  assert.equal(reader.writeSnapshot(["10.9.9.9"], 6_000), "live", "a snapshot read before the feed started is not stored over it");
  reader.unlock();
  // the lock held by a request thread: the feed's write waits for the next turn
  assert.ok(reader.tryLock(7_000));
  live.connected("10.0.0.8");
  await tick();
  await tick();
  assert.deepEqual([...reader.view().addrs!], ["2001:db8::9"]);
  reader.unlock();
  await tick();
  await tick();
  assert.deepEqual([...reader.view().addrs!].sort(), ["10.0.0.8", "2001:db8::9"]);
  // a transport that lists its connections: the whole list at once, written only when the set changed
  live.setAll(["10.0.0.8", "::ffff:10.0.0.8", "2001:db8::9"]);
  await tick();
  const before = reader.view();
  live.setAll(["2001:db8::9", "10.0.0.8"]);
  await tick();
  assert.equal(reader.view(), before, "same set: the board is not written again");
  live.setAll(["10.0.0.8"]);
  await tick();
  assert.deepEqual([...reader.view().addrs!], ["10.0.0.8"]);
  live.close();
  await tick();
  v = reader.view();
  assert.equal(v.live, false);
  assert.equal(v.addrs, undefined, "closed: back to snapshots, none yet");
});

test("a connection storm at a large fleet: the live feed's board is written at most once per gap that grows with the addresses, and what changed is still written", async () => {
  let clock = 10_000;
  let writes = 0;
  class CountedBoard extends PublishPeersBoard {
    override writeLive(addrs: Iterable<string> | undefined, atMs: number): boolean {
      writes++;
      return super.writeLive(addrs, atMs);
    }
  }
  const board = new CountedBoard(undefined, 0);
  const reader = new PublishPeersBoard(board.sab);
  const live = new LivePublishPeers(board, () => clock);
  await tick();
  // a small fleet: every turn's change is on the board at the turn's end
  for (let i = 0; i < 5; i++) {
    live.connected(`10.1.0.${i}`);
    await tick();
    assert.equal(reader.view().addrs!.size, i + 1, `small fleet, change ${i}: written at the end of its turn`);
  }
  // 4,000 addresses: after a write the next waits 4,000 × the gap per address
  for (let i = 5; i < 4000; i++) live.connected(`10.2.${i >> 8}.${i & 255}`);
  await tick();
  assert.equal(reader.view().addrs!.size, 4000, "the first change after a small write: at the turn's end");
  const gapMs = 4000 * livePeersWriteGapMsPerAddress;
  assert.ok(gapMs >= 2, `a gap of ${gapMs} ms`);
  writes = 0;
  for (let i = 0; i < 50; i++) {
    live.connected(`10.3.0.${i}`);
    await tick();
  }
  assert.equal(writes, 0, "50 turns with a connection each, the clock not past the gap: none written yet");
  assert.equal(reader.view().addrs!.size, 4000);
  clock += gapMs;
  await new Promise((r) => setTimeout(r, gapMs + 30));
  assert.equal(writes, 1, "then one write carries them all");
  assert.equal(reader.view().addrs!.size, 4050);
  live.close();
  await new Promise((r) => setTimeout(r, gapMs + 30));
  assert.equal(reader.view().live, false, "close hands the board back to snapshots at once");
});

test("a publish names the matched minions the board's addresses do not see, and trusts an older board only when it sees them all", () => {
  const cfg = { ...masterDefaults(), publish_port: 1, brine_presence: "connections" as const, ipv6: false, interface: "0.0.0.0" };
  const grains: Record<string, Record<string, unknown>> = { a: { ipv4: ["10.0.0.5"] }, b: { ipv4: ["10.0.0.6"] } };
  const grainsOf = (id: string) => grains[id];
  const t0 = 50_000;
  const board = new PublishPeersBoard(undefined, t0);
  board.tryLock(t0);
  board.writeSnapshot(["10.0.0.5"], t0, 7);
  board.unlock();
  const store = undefined as never; // an unclustered `connections` master reads no store
  assert.deepEqual(notConnectedAtPublish(cfg, store, board, ["a", "b"], grainsOf, t0 + 100, steady), ["b"]);
  assert.deepEqual(notConnectedAtPublish(cfg, store, board, ["a"], grainsOf, t0 + publishPeersStaleMsMax - 1, steady), [], "an older board that sees every matched minion answers");
  // nothing listens on port 1 here: a read of the kernel's tables sees nobody, and the publish cannot tell
  assert.equal(notConnectedAtPublish(cfg, store, board, ["a", "b"], grainsOf, t0 + publishPeersFreshMsMax + 1, steady), undefined, "an older board that misses b is read again");
  assert.equal(notConnectedAtPublish({ ...cfg, brine_presence: "heard" }, store, board, ["a", "b"], grainsOf, t0), undefined, "heard: no word at publish");
});

test("a publish reads a minion's addresses from its cached data once per window, and keeps only its ipv4/ipv6 grains", () => {
  let decodes = 0;
  let ip = "10.1.0.1";
  const grainsOf = (id: string) => (id === "nodata" ? undefined : (decodes++, { id, ipv4: [ip], ipv6: [], os: "Linux", huge: "x".repeat(1000) }));
  const t0 = 7_000_000;
  assert.deepEqual(addressGrains("ag-1", grainsOf, t0), { ipv4: ["10.1.0.1"], ipv6: [] });
  ip = "10.1.0.2";
  for (let i = 1; i < 100; i++) addressGrains("ag-1", grainsOf, t0 + i * 10);
  assert.equal(decodes, 1, "100 publishes within the window: one decode");
  assert.deepEqual(addressGrains("ag-1", grainsOf, t0 + minionAddressesMsMax), { ipv4: ["10.1.0.2"], ipv6: [] }, "past the window: read again");
  assert.equal(decodes, 2);
  assert.equal(addressGrains("nodata", grainsOf, t0), undefined);
  assert.equal(addressGrains("nodata", grainsOf, t0 + 1), undefined, "no data: not kept, asked again");
  // bounded: the oldest entry makes room
  for (let i = 0; i < minionAddressesEntriesMax; i++) addressGrains(`ag-fill-${i}`, grainsOf, t0 + minionAddressesMsMax);
  decodes = 0;
  addressGrains("ag-1", grainsOf, t0 + minionAddressesMsMax + 1);
  assert.equal(decodes, 1, "pushed out by newer minions");
  // entries past the window go as the next ones come: the thread keeps only what its last window's publishes read
  assert.equal(addressesKept(), minionAddressesEntriesMax);
  addressGrains("ag-2", grainsOf, t0 + 2 * minionAddressesMsMax + 1);
  assert.equal(addressesKept(), 1, "every older entry dropped");
});

test("a publish to a fleet of 20,000 minions reads each one's addresses once per window, not again at the next publish", () => {
  let decodes = 0;
  const grainsOf = (id: string) => (decodes++, { id, ipv4: ["10.2.0.1"], ipv6: [] });
  const t0 = 90_000_000;
  const fleet = Array.from({ length: 20_000 }, (_, i) => `fleet-${i}`);
  for (const id of fleet) addressGrains(id, grainsOf, t0);
  assert.equal(decodes, fleet.length);
  for (const id of fleet) addressGrains(id, grainsOf, t0 + 1000);
  assert.equal(decodes, fleet.length, "the second publish within the window decodes nothing");
  assert.ok(notConnectedMinionsMax >= fleet.length, "and a publish that size looks its minions' presence up");
});

test("the kernel's count of TCP sockets in use is read from sockstat (and sockstat6 only when tcp6 is read)", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-sockstat-"));
  try {
    writeFileSync(path.join(dir, "sockstat"), "sockets: used 12\nTCP: inuse 9 orphan 0 tw 3 alloc 9 mem 1\nUDP: inuse 2 mem 0\n");
    writeFileSync(path.join(dir, "sockstat6"), "TCP6: inuse 4\nUDP6: inuse 1\n");
    assert.equal(tcpSocketsInUse(["tcp"], dir), 9);
    assert.equal(tcpSocketsInUse(["tcp", "tcp6"], dir), 13);
    assert.ok(Number.isNaN(tcpSocketsInUse(["tcp"], path.join(dir, "absent"))), "unreadable: unknown");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
