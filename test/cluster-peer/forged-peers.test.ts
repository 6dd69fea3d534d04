/**
 * Unknown and forged peers over real sockets: each is refused, logged with its claimed id and reason,
 * reported through the `refused` event, never reported up, and nothing it sends reaches a handler.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as zmq from "zeromq";
import type { RefusedInfo } from "../../src/workers/raft/peer/peer-transport.js";
import { FRAME } from "../../src/workers/raft/peer/framing.js";
import { bytes, identity, nextEvent, startNode, waitFor, type NodeSpec, type TestNode, freePort } from "./helpers.js";

/** m1 listening, knowing only m2; `handled` collects whatever reaches its handler. */
async function target(): Promise<{ m1: TestNode; handled: string[] }> {
  const m1 = await startNode({ id: "m1", peers: [], knows: ["m2"] });
  const handled: string[] = [];
  m1.t.on("raft/cluster", (m) => {
    handled.push(m.from);
  });
  return { m1, handled };
}

/** Dials m1 as `spec` would, expects m1 to refuse with `reason`, and checks the log and the caller's view. */
async function expectRefused(spec: Omit<NodeSpec, "peers">, reason: string, claimed: string): Promise<void> {
  const { m1, handled } = await target();
  const refusedByM1 = nextEvent<[RefusedInfo]>(m1.t.events, "refused");
  // a twin of m1 cannot name m1 as its peer (its own id): it dials the address only
  const byAddress = spec.id === "m1";
  const x = await startNode({ ...spec, peers: [{ ...(byAddress ? {} : { id: "m1" }), host: m1.host, port: m1.port }], knows: ["m1"] });
  try {
    const refusedByPeer = nextEvent<[RefusedInfo]>(x.t.events, "refused", (i) => i.direction === "remote");
    if (!byAddress) x.t.send("m1", "raft/cluster", bytes("let me in"));
    const [info] = await refusedByM1;
    assert.equal(info.direction, "inbound");
    assert.equal(info.reason, reason);
    assert.equal(info.claimedId, claimed);
    const [told] = await refusedByPeer;
    assert.equal(told.reason, reason, "the refused side is told why (REFUSE frame)");
    const line = m1.log.warnings().find((l) => l.includes("refused inbound peer"));
    assert.ok(line, `m1 logs the refusal; got ${JSON.stringify(m1.log.lines)}`);
    assert.match(line, new RegExp(`"${claimed}" \\(${reason}\\)`));
    assert.equal(x.t.isUp("m1"), false);
    assert.equal(x.t.upPeers().length, 0);
    if (!byAddress) assert.equal(x.t.status()[0]!.queuedMessages, 1, "the message never left the refused side");
    assert.deepEqual(handled, []);
    assert.ok(m1.t.counters.refused >= 1);
  } finally {
    await x.t.close();
    await m1.t.close();
  }
}

test("an unknown peer (no peers/<id>.pub) is refused and logged", async () => {
  await expectRefused({ id: "intruder" }, "unknown-peer", "intruder");
});

test("a forged peer (a known id, the wrong private key) is refused and logged", async () => {
  await expectRefused({ id: "m2", identity: identity("m2", "stolen-name") }, "forged", "m2");
});

test("a peer claiming this master's own node id is refused as a duplicate and logged", async () => {
  await expectRefused({ id: "m1", identity: identity("m1", "twin") }, "duplicate-id", "m1");
});

test("a peer from another cluster_id is refused and logged", async () => {
  await expectRefused({ id: "m2", cluster: "someone-else" }, "cluster", "m2");
});

test("an impostor at a peer's address (its id, not its key) is refused by the dialling master and logged", async () => {
  const impostor = await startNode({ id: "m2", identity: identity("m2", "impostor"), peers: [], knows: ["m1"] });
  const m1 = await startNode({ id: "m1", peers: [{ id: "m2", host: impostor.host, port: impostor.port }] });
  try {
    let up = false;
    m1.t.events.on("peerUp", () => (up = true));
    const [info] = await nextEvent<[RefusedInfo]>(m1.t.events, "refused");
    assert.equal(info.direction, "outbound");
    assert.equal(info.reason, "forged");
    assert.equal(info.claimedId, "m2");
    assert.ok(m1.log.warnings().some((l) => /refused peer "m2" at 127\.0\.0\.1:\d+ \(forged\)/.test(l)), JSON.stringify(m1.log.lines));
    assert.equal(up, false);
    assert.equal(m1.t.isUp("m2"), false);
  } finally {
    await m1.t.close();
    await impostor.t.close();
  }
});

test("the refusal log has a budget: a flood of forged HELLOs is counted, not logged line by line", async () => {
  const port = await freePort();
  const m1 = await startNode({ id: "m1", port, peers: [], knows: ["m2"], limits: { refusalLogsPerWindow: 3, refusalLogWindowMs: 60_000 } });
  // an intruder that redials as fast as it can
  const x = await startNode({ id: "intruder", peers: [{ id: "m1", host: "127.0.0.1", port }], knows: ["m1"], limits: { reconnectMinMs: 1, reconnectMaxMs: 1 } });
  try {
    await waitFor(() => m1.t.counters.refused >= 10, "10 refusals");
    assert.equal(m1.log.warnings().filter((l) => l.includes("refused inbound")).length, 3);
  } finally {
    await x.t.close();
    await m1.t.close();
  }
});

test("frames without a handshake never reach a handler", async () => {
  const { m1, handled } = await target();
  const raw = new zmq.Dealer({ linger: 0 });
  try {
    raw.connect(`tcp://${m1.host}:${m1.port}`);
    const fake = new Uint8Array(64);
    fake[0] = FRAME.DATA;
    for (let i = 0; i < 5; i++) await raw.send(fake);
    const auth = fake.slice();
    auth[0] = FRAME.AUTH;
    await raw.send(auth);
    await waitFor(() => m1.t.counters.unauthenticatedFrames >= 6, "6 unauthenticated frames counted");
    assert.deepEqual(handled, []);
  } finally {
    raw.close();
    await m1.t.close();
  }
});
