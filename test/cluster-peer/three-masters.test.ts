/**
 * Three masters in one process on 127.0.0.1-3, every pair connected, exchanging Raft-shaped traffic at once:
 * each master leads its own group and pipelines appends (requests answered with acks) and heartbeats
 * (one-way) to the other two. Every append reaches each follower once and in order, every ack answers its
 * own append, and one master dials by address only (Salt's `cluster_peers: [host:port]`) and learns the ids.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Encoder } from "cbor-x";
import { startNode, waitUp, type TestNode, freePort } from "./helpers.js";

const cbor = new Encoder({ mapsAsObjects: true, useRecords: false, tagUint8Array: false });
const APPENDS = 300;
const HEARTBEATS = 50;

interface MsgApp {
  type: "MsgApp";
  group: string;
  term: number;
  index: number;
  entries: { index: number; data: Uint8Array }[];
}

test("three masters exchange Raft-like traffic: appends in order and exactly once, acks correlated, heartbeats delivered", async () => {
  const hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.3"];
  const ids = ["m1", "m2", "m3"];
  const ports = [await freePort(hosts[0]), await freePort(hosts[1]), await freePort(hosts[2])];
  const nodes: TestNode[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      const peers = [0, 1, 2]
        .filter((j) => j !== i)
        // m1 knows its peers by address only and learns who they are in the handshake
        .map((j) => (i === 0 ? { host: hosts[j]!, port: ports[j]! } : { id: ids[j]!, host: hosts[j]!, port: ports[j]! }));
      nodes.push(await startNode({ id: ids[i]!, host: hosts[i], port: ports[i], peers, knows: ids.filter((x) => x !== ids[i]) }));
    }
    await Promise.all(nodes.map((n, i) => waitUp(n.t, ids.filter((_, j) => j !== i))));

    // follower state: the last append index seen per (group, follower) and the heartbeats counted
    const lastIndex = new Map<string, number>();
    const heartbeats = new Map<string, number>();
    const violations: string[] = [];
    nodes.forEach((n, i) => {
      n.t.on("raft/append", (m) => {
        const app = cbor.decode(m.payload) as MsgApp;
        const key = `${app.group}@${ids[i]}`;
        const last = lastIndex.get(key) ?? 0;
        if (app.group !== `g-${m.from}`) violations.push(`${key}: group ${app.group} from ${m.from}`);
        if (app.index !== last + 1) violations.push(`${key}: index ${app.index} after ${last}`);
        lastIndex.set(key, app.index);
        return cbor.encode({ type: "MsgAppResp", group: app.group, index: app.index, from: ids[i] }) as Uint8Array;
      });
      n.t.on("raft/heartbeat", (m) => {
        const key = `${m.from}->${ids[i]}`;
        heartbeats.set(key, (heartbeats.get(key) ?? 0) + 1);
      });
    });

    const leaders = nodes.map(async (n, i) => {
      const followers = ids.filter((_, j) => j !== i);
      const acks: Promise<void>[] = [];
      for (let index = 1; index <= APPENDS; index++) {
        const app: MsgApp = { type: "MsgApp", group: `g-${ids[i]}`, term: 1, index, entries: [{ index, data: new Uint8Array(200).fill(index & 0xff) }] };
        const payload = cbor.encode(app) as Uint8Array;
        for (const f of followers) {
          acks.push(
            n.t.request(f, "raft/append", payload, 30_000).then((r) => {
              const resp = cbor.decode(r) as { group: string; index: number; from: string };
              assert.deepEqual([resp.group, resp.index, resp.from], [app.group, index, f]);
            }),
          );
          if (index % (APPENDS / HEARTBEATS) === 0) n.t.send(f, "raft/heartbeat", cbor.encode({ type: "MsgHeartbeat", term: 1 }) as Uint8Array);
        }
        if (index % 50 === 0) await new Promise((r) => setImmediate(r));
      }
      await Promise.all(acks);
    });
    await Promise.all(leaders);

    assert.deepEqual(violations, []);
    for (const leader of ids) {
      for (const f of ids.filter((x) => x !== leader)) {
        assert.equal(lastIndex.get(`g-${leader}@${f}`), APPENDS, `${f} has all of g-${leader}`);
        assert.equal(heartbeats.get(`${leader}->${f}`), HEARTBEATS, `heartbeats ${leader}->${f}`);
      }
    }
    assert.deepEqual(
      nodes[0]!.t.status().map((s) => s.id).sort(),
      ["m2", "m3"],
      "m1 learned its peers' ids from the handshake",
    );
    for (const n of nodes) {
      assert.equal(n.t.counters.refused + n.t.counters.replays + n.t.counters.authFailures + n.t.counters.badFrames, 0);
    }
  } finally {
    for (const n of nodes) await n.t.close();
  }
});
