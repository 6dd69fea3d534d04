/**
 * The nonce owner check's decisions (src/shared/nonce-owner.ts), table-tested: which master decides for a
 * minion, how a batch of asks is split between deciders, what a decider answers, how an answer is taken, and
 * what a frame does with its verdict. Then the main thread's service (src/main-thread/cluster/nonce-owner.ts)
 * over a fake peer channel: a decider's answer, a decider that fails or is slow (undecided, counted, then passed
 * over for a while), and a
 * malformed ask from a peer (refused with its code); and a request worker's client whose own deadline passes first
 * (its undecided acceptances reported to, and counted by, the main thread).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { BroadcastChannel } from "node:worker_threads";
import { NONCE_FRESH, NONCE_SEEN, NONCE_UNDECIDED, badAsk, commandNeedsDecider, badWorkerAsk, decideAsk, deciderOf, frameAction, needsAsk, nonceOwnerChannelName, ownerAskNoncesMax, planAsks, takeAnswer, type NonceOwnerMsg } from "../../src/shared/nonce-owner.js";
import { NonceSet, packNonces } from "../../src/shared/nonce-set.js";
import { NONCE_CHANNEL, NonceOwnerService, deciderSkipMs, type NonceOwnerChannel } from "../../src/main-thread/cluster/nonce-owner.js";
import { isBrineError } from "../../src/shared/errors.js";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import type { PeerHandler } from "../../src/workers/raft/peer/peer-types.js";
import { NonceOwnerClient } from "../../src/workers/req-handler/nonce-owner-client.js";
import type { RingReader } from "../../src/shared/sab-ring/reader.js";

const up = (...ids: string[]) => (id: string) => ids.includes(id);

test("the decider of a minion is the first of its ring order that is this master or up", () => {
  const rows: [string[], string, string[], string][] = [
    // order (owner first), self, up peers, decider
    [["m1", "m2", "m3"], "m1", ["m2", "m3"], "m1"],
    [["m1", "m2", "m3"], "m2", ["m1", "m3"], "m1"],
    [["m1", "m2", "m3"], "m2", ["m3"], "m2"], // owner down: the next in order is this master
    [["m1", "m2", "m3"], "m3", ["m2"], "m2"], // owner down: the next one up decides for everyone who sees it so
    [["m1", "m2", "m3"], "m3", [], "m3"], // alone: this master decides
    [[], "m1", ["m2"], "m1"], // no ring published: this master
  ];
  for (const [order, self, ups, want] of rows) assert.equal(deciderOf(order, self, up(...ups)), want, `${order} self=${self} up=${ups}`);
  assert.equal(needsAsk(null, "m1"), false, "no ring: nobody to ask");
  assert.equal(needsAsk("m1", "m1"), false, "this master owns it");
  assert.equal(needsAsk("m2", "m1"), true, "another master owns it");
});

/** planAsks over whole ring orders (the owner first), as a worker's ask and the ring give them. */
function plan(orders: string[][], self: string, isUp: (id: string) => boolean) {
  const owners = [...new Set(orders.map((o) => o[0]!))];
  const read: number[] = [];
  const p = planAsks(owners, Uint8Array.from(orders.map((o) => owners.indexOf(o[0]!))), self, isUp, (i) => (read.push(i), orders[i]!));
  return { ...p, read };
}

test("a batch's asks are split by decider: this master's share is decided here, each peer's asked once", () => {
  const orders = [
    ["m2", "m1", "m3"],
    ["m3", "m2", "m1"],
    ["m2", "m3", "m1"],
    ["m1", "m2", "m3"],
    ["m3", "m1", "m2"],
  ];
  const all = plan(orders, "m1", up("m2", "m3"));
  assert.deepEqual(all.local, [3]);
  assert.deepEqual(all.read, [], "every owner up: no ring order read");
  assert.deepEqual([...all.remote].sort(), [
    ["m2", [0, 2]],
    ["m3", [1, 4]],
  ]);
  const m3Down = plan(orders, "m1", up("m2"));
  assert.deepEqual(m3Down.local, [3, 4], "m3's minions whose next is this master");
  assert.deepEqual([...m3Down.remote], [["m2", [0, 1, 2]]]);
  assert.deepEqual(m3Down.read, [1, 4], "the order read only for the minions whose owner is down");
});

test("a decider's answer: fresh once, then seen; malformed asks and answers are refused with a reason", () => {
  const set = new NonceSet(1024);
  const [a, b] = [newNonce(), newNonce()];
  const body = packNonces([a, b, a]);
  assert.equal(badAsk(body), undefined);
  assert.deepEqual([...decideAsk(body, (hi, lo) => set.insertWords(hi, lo))], [NONCE_FRESH, NONCE_FRESH, NONCE_SEEN], "a repeated nonce within one ask");
  assert.deepEqual([...decideAsk(packNonces([b]), (hi, lo) => set.insertWords(hi, lo))], [NONCE_SEEN], "asked again");
  assert.equal(set.checkAndInsert(a), false, "the decider's own workers see what it decided");
  assert.deepEqual([...decideAsk(new Uint8Array(8), () => true)], [NONCE_SEEN], "a zero word is never a nonce");
  assert.match(badAsk(new Uint8Array(0))!, /no nonce/);
  assert.match(badAsk(new Uint8Array(12))!, /whole number/);
  assert.match(badAsk(new Uint8Array((ownerAskNoncesMax + 1) * 8))!, /more than/);

  const verdicts = new Uint8Array(4).fill(NONCE_UNDECIDED);
  assert.equal(takeAnswer(verdicts, [1, 3], Uint8Array.of(NONCE_SEEN, NONCE_FRESH)), undefined);
  assert.deepEqual([...verdicts], [NONCE_UNDECIDED, NONCE_SEEN, NONCE_UNDECIDED, NONCE_FRESH]);
  const untouched = new Uint8Array(2).fill(NONCE_UNDECIDED);
  assert.match(takeAnswer(untouched, [0, 1], Uint8Array.of(NONCE_FRESH))!, /1 verdicts for 2/);
  assert.match(takeAnswer(untouched, [0, 1], Uint8Array.of(NONCE_FRESH, 7))!, /verdict 7/);
  assert.deepEqual([...untouched], [NONCE_UNDECIDED, NONCE_UNDECIDED], "a bad answer decides nothing");

  const n8 = new Uint8Array(8);
  assert.equal(badWorkerAsk({ owners: ["m2"], which: Uint8Array.of(0), ids: ["a"], n: n8 }), undefined);
  assert.match(badWorkerAsk({ owners: [], which: Uint8Array.of(0), ids: ["a"], n: n8 })!, /owners/);
  assert.match(badWorkerAsk({ owners: ["m2"], which: Uint8Array.of(1), ids: ["a"], n: n8 })!, /names no owner/);
  assert.match(badWorkerAsk({ owners: ["m2"], which: Uint8Array.of(0, 0), ids: ["a"], n: n8 })!, /ids/);
  assert.match(badWorkerAsk({ owners: ["m2"], which: Uint8Array.of(0), ids: ["a"], n: new Uint8Array(16) })!, /nonces/);

  assert.equal(frameAction(NONCE_FRESH), "dispatch");
  assert.equal(frameAction(NONCE_SEEN), "refuse");
  assert.equal(frameAction(NONCE_UNDECIDED), "fallback");
});

/** A fake peer channel: `answer` plays each peer (undefined: it never answers within the bound). */
class FakeChannel implements NonceOwnerChannel {
  handler: PeerHandler | undefined;
  asked: { peer: string; count: number }[] = [];
  constructor(
    private readonly ups: Set<string>,
    private readonly answer: (peer: string, body: Uint8Array) => Promise<Uint8Array>,
  ) {}
  request(peer: string, channel: string, body: Uint8Array): Promise<Uint8Array> {
    assert.equal(channel, NONCE_CHANNEL);
    this.asked.push({ peer, count: body.byteLength / 8 });
    return this.answer(peer, body);
  }
  isUp(id: string): boolean {
    return this.ups.has(id);
  }
  on(channel: string, h: PeerHandler): () => void {
    assert.equal(channel, NONCE_CHANNEL);
    this.handler = h;
    return () => (this.handler = undefined);
  }
}

/** The ring orders of the minions the service tests ask about, by id. */
const ringOrders = new Map<string, string[]>();

/** Posts an ask as a request worker does (each minion's owner: the first of its order) and waits for its verdicts. */
async function ask(name: string, orders: string[][], nonces: string[]): Promise<number[]> {
  const owners = [...new Set(orders.map((o) => o[0]!))];
  const ids = orders.map((o) => {
    const id = `minion-${ringOrders.size}`;
    ringOrders.set(id, o);
    return id;
  });
  const ch = new BroadcastChannel(name);
  try {
    return await new Promise<number[]>((resolve, reject) => {
      ch.onmessage = (e: unknown) => {
        const m = (e as { data: NonceOwnerMsg }).data;
        if (m.k === "res" && m.to === "w1") resolve([...m.v]);
        if (m.k === "err" && m.to === "w1") reject(new Error(m.text));
      };
      ch.postMessage({ k: "ask", from: "w1", id: 1, owners, which: Uint8Array.from(orders.map((o) => owners.indexOf(o[0]!))), ids, n: packNonces(nonces) } satisfies NonceOwnerMsg);
    });
  } finally {
    ch.close();
  }
}

test("the main thread asks each decider once per batch; a failed or slow decider leaves its share undecided, counted", async () => {
  const deciderSet = new NonceSet(1024);
  const seenBefore = newNonce();
  deciderSet.checkAndInsert(seenBefore);
  const fake = new FakeChannel(new Set(["m2", "m3"]), async (peer, body) => {
    if (peer === "m3") throw new Error("CLUSTER_PEER_TIMEOUT: no answer"); // a slow or failed decider
    return decideAsk(body, (hi, lo) => deciderSet.insertWords(hi, lo));
  });
  const name = nonceOwnerChannelName("/tmp/nonce-owner-test", Math.floor(Math.random() * 1e9));
  let now = 1_000_000;
  const svc = new NonceOwnerService("m1", fake, () => new Uint8Array(0), 250, name, (id) => ringOrders.get(id)!, () => now);
  try {
    const n = [newNonce(), seenBefore, newNonce(), newNonce()];
    const v = await ask(name, [["m2", "m1"], ["m2", "m3"], ["m3", "m1"], ["m1", "m2"]], n);
    assert.deepEqual(v, [NONCE_FRESH, NONCE_SEEN, NONCE_UNDECIDED, NONCE_FRESH]);
    assert.deepEqual(fake.asked.sort((a, b) => a.peer.localeCompare(b.peer)), [
      { peer: "m2", count: 2 },
      { peer: "m3", count: 1 },
    ]);
    assert.equal(svc.counters.undecided, 1);
    assert.equal(svc.counters.seenRemote, 1);
    assert.equal(svc.counters.askedRemote, 3);
    // m3 failed: passed over for deciderSkipMs, its minions' next decides (here this master, then m2)
    fake.asked = [];
    assert.deepEqual(await ask(name, [["m3", "m1"], ["m3", "m2"]], [newNonce(), newNonce()]), [NONCE_FRESH, NONCE_FRESH]);
    assert.deepEqual(fake.asked, [{ peer: "m2", count: 1 }], "m3 not asked while passed over");
    // m3 is still up, and every other master's decider for its minions: both let through on a stand-in's word
    assert.equal(svc.counters.standIn, 2);
    assert.equal(svc.counters.undecided, 1);
    now += deciderSkipMs;
    fake.asked = [];
    assert.deepEqual(await ask(name, [["m3", "m1"]], [newNonce()]), [NONCE_UNDECIDED]);
    assert.deepEqual(fake.asked, [{ peer: "m3", count: 1 }], "asked again once the time is over");
  } finally {
    svc.close();
  }
});

test("a peer's ask is decided by this master's set; a malformed one is refused with NONCE_OWNER_BAD_ASK", async () => {
  const set = new NonceSet(1024);
  const fake = new FakeChannel(new Set(), async () => new Uint8Array(0));
  const name = nonceOwnerChannelName("/tmp/nonce-owner-test", Math.floor(Math.random() * 1e9));
  const svc = new NonceOwnerService("m1", fake, (b) => decideAsk(b, (hi, lo) => set.insertWords(hi, lo)), 250, name, (id) => ringOrders.get(id)!);
  try {
    const a = newNonce();
    const call = (payload: Uint8Array) => fake.handler!({ from: "m2", channel: NONCE_CHANNEL, payload, request: true });
    assert.deepEqual([...(call(packNonces([a])) as Uint8Array)], [NONCE_FRESH]);
    assert.deepEqual([...(call(packNonces([a])) as Uint8Array)], [NONCE_SEEN]);
    assert.throws(() => call(new Uint8Array(5)), (e: unknown) => isBrineError(e, "NONCE_OWNER_BAD_ASK"));
    assert.equal(svc.counters.refused, 1);
    assert.equal(svc.counters.decided, 2);
    assert.equal(svc.counters.decidedSeen, 1);
  } finally {
    svc.close();
  }
});

test("which commands wait for the decider: every one that stores, fires or publishes, and any unknown one; not the reads", () => {
  for (const cmd of ["_return", "_syndic_return", "_minion_event", "_mine", "_mine_delete", "_mine_flush", "minion_pub", "minion_publish", "minion_runner", "_file_recv", "_pillar", "_master_tops", "a_command_added_later", undefined, 7])
    assert.equal(commandNeedsDecider(cmd), true, String(cmd));
  for (const cmd of ["_serve_file", "_file_hash", "_file_hash_and_stat", "_file_find", "_file_list", "_file_list_emptydirs", "_dir_list", "_symlink_list", "_file_envs", "_master_opts", "_mine_get", "pub_ret"])
    assert.equal(commandNeedsDecider(cmd), false, cmd);
});

test("a request worker whose own deadline passes before the main thread's answer accepts undecided, and the main thread counts it", async () => {
  const name = nonceOwnerChannelName("/tmp/nonce-owner-test", Math.floor(Math.random() * 1e9));
  // the decider answers, but only after the worker's deadline (its wait, 50 ms, plus the client's slack)
  const fake = new FakeChannel(new Set(["m2"]), (_peer, body) => new Promise((r) => setTimeout(() => r(decideAsk(body, () => true)), 600)));
  const svc = new NonceOwnerService("m1", fake, () => new Uint8Array(0), 50, name, (id) => ringOrders.get(id) ?? ["m2", "m1"]);
  const client = new NonceOwnerClient(name, { owner: () => "m2" } as unknown as RingReader, "m1", 50);
  try {
    const verdicts = await Promise.all([client.ask("cl-a", newNonce()), client.ask("cl-b", newNonce())]);
    assert.deepEqual(verdicts, [NONCE_UNDECIDED, NONCE_UNDECIDED], "the worker's deadline passed: accepted undecided");
    // the main thread's own ask then gets its answer: it left nothing undecided, the worker did
    await new Promise((r) => setTimeout(r, 800));
    assert.equal(svc.counters.askedRemote, 2);
    assert.equal(svc.counters.undecided, 2, "the two requests the worker accepted undecided are counted");
  } finally {
    svc.close();
  }
});
