/**
 * The manager's transport hook with a flush (the Raft link: send() queues one payload per group and peer,
 * flush() writes each peer's queue as one frame): nothing a manager sends is left unflushed, and a leader's
 * appends are flushed before its own durable write starts (that write blocks the Raft thread).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MemoryBackend } from "../../src/workers/raft/backend.js";
import { GroupManager, type Transport } from "../../src/workers/raft/manager.js";
import { raftIdOf } from "../../src/shared/node-ids.js";
import type { Message } from "../../src/workers/raft/core/types.js";
import { TEST_LIMITS } from "./harness.js";

const NAMES = ["f1", "f2", "f3"];

test("messages a transport holds until flushed still elect a leader and commit, and a leader's appends are flushed before its own write", { timeout: 60_000 }, async () => {
  const managers = new Map<string, GroupManager>();
  const byRaftId = new Map(NAMES.map((n) => [raftIdOf(n), n]));
  /** per node, what happened in order: "app" (an append with entries queued), "flush", "commit" */
  const events = new Map<string, string[]>(NAMES.map((n) => [n, []]));
  let flushes = 0;
  for (const name of NAMES) {
    const queued: { group: string; m: Message }[] = [];
    const log = events.get(name)!;
    const transport: Transport = {
      send: (group, msgs) => {
        for (const m of msgs) {
          queued.push({ group, m });
          if (m.type === "MsgApp" && (m.entries?.length ?? 0) > 0) log.push("app");
        }
      },
      // delivered only when flushed, on a later macrotask (as a socket would)
      flush: () => {
        flushes++;
        log.push("flush");
        for (const { group, m } of queued.splice(0)) setImmediate(() => managers.get(byRaftId.get(m.to)!)?.receive(group, m));
      },
    };
    const backend = new MemoryBackend();
    backend.onCommit = () => log.push("commit");
    managers.set(name, new GroupManager({ self: name, backend, transport, limits: TEST_LIMITS }));
  }
  const ticker = setInterval(() => {
    for (const m of managers.values()) m.tick();
  }, TEST_LIMITS.tickMs);
  try {
    for (const m of managers.values()) await m.bootstrap(NAMES);
    for (const m of managers.values()) await m.start();
    let leader: GroupManager | undefined;
    for (const end = Date.now() + 30_000; !leader && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 10));
      leader = [...managers.values()].find((m) => m.status().groups[0]?.role === "leader");
    }
    assert.ok(leader, "a leader was elected through a transport that holds messages until flushed");
    const lead: GroupManager = leader;
    for (const m of managers.values()) events.get(m.self)!.length = 0;
    for (let i = 0; i < 10; i++) {
      const r = await lead.propose("cluster", { kind: "ROUTE", value: { data_type: `fl${i}`, ring_id: null } });
      assert.equal(r.applied, "applied");
    }
    // every append the leader queued was flushed before its next durable write began
    const log = events.get(lead.self)!;
    let pendingApp = false;
    let apps = 0;
    for (const e of log) {
      if (e === "app") {
        pendingApp = true;
        apps++;
      } else if (e === "flush") pendingApp = false;
      else assert.equal(pendingApp, false, `a commit started with an append still queued: ${log.join(" ")}`);
    }
    assert.ok(apps >= 10, "the proposals were replicated");
    assert.ok(flushes > 0);
  } finally {
    clearInterval(ticker);
    for (const m of managers.values()) await m.close();
  }
});
