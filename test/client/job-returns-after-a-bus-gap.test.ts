/**
 * jobReturns (src/lib/client/job-returns.ts) after its event source was cut off: the pending minions' returns are
 * read from the job cache once the source is back, a return both read there and seen on the bus is yielded once,
 * the minions still missing when the wait ends are read again, and a wait with no gap never reads the cache.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { BusEvent } from "../../src/shared/event-frame.js";
import { jobReturns } from "../../src/lib/client/job-returns.js";
import type { JobReturn, PubReply } from "../../src/lib/client/local-client.js";

const JID = "20261126001500123456";

function source() {
  let listener: ((e: BusEvent) => void) | undefined;
  let gap: (() => void) | undefined;
  return {
    subscribe: (fn: (e: BusEvent) => void) => ((listener = fn), () => (listener = undefined)),
    watchGaps: (fn: () => void) => ((gap = fn), () => (gap = undefined)),
    ret: (id: string) => listener?.({ tag: `salt/job/${JID}/ret/${id}`, data: { id, jid: JID, return: `bus ${id}`, retcode: 0 } } as BusEvent),
    gap: () => gap?.(),
  };
}

async function collect(it: AsyncGenerator<JobReturn>): Promise<JobReturn[]> {
  const out: JobReturn[] = [];
  for await (const r of it) out.push(r);
  return out;
}

const pub = (minions: string[]) => async (): Promise<PubReply> => ({ jid: JID, minions, missing: [] });
const shown = (rs: JobReturn[]) => rs.map((r) => ("data" in r ? `${r.id}=${String(r.data.return)}` : `${r.id} missing`)).sort();

test("after a gap the pending minions' returns come from the job cache, each once, and the wait ends when all are found", async () => {
  const s = source();
  const asked: string[][] = [];
  const cache: Record<string, string> = { a: "cache a", b: "cache b" };
  const it = jobReturns(s.subscribe, pub(["a", "b", "c"]), { tgt: "*", fun: "test.ping" }, {
    timeoutMs: 60_000,
    gatherJobTimeoutMs: 1_000,
    watchGaps: s.watchGaps,
    recover: async (jid, ids) => {
      assert.equal(jid, JID);
      asked.push(ids);
      return ids.filter((id) => id in cache).map((id) => ({ id, data: { id, jid, return: cache[id], retcode: 0 } }));
    },
  });
  const got = collect(it);
  await new Promise((r) => setTimeout(r, 20));
  s.gap();
  await new Promise((r) => setTimeout(r, 150));
  s.ret("a"); // seen on the bus too, after the cache gave it: not yielded again
  s.ret("c");
  const rs = await got;
  assert.deepEqual(asked, [["a", "b", "c"]]);
  assert.deepEqual(shown(rs), ["a=cache a", "b=cache b", "c=bus c"]);
});

test("minions still missing when the wait ends are read from the cache again after a gap; without a gap never", async () => {
  for (const withGap of [true, false]) {
    const s = source();
    const asked: string[][] = [];
    let late = false;
    const it = jobReturns(s.subscribe, pub(["a", "b"]), { tgt: "*", fun: "test.ping" }, {
      timeoutMs: 200,
      gatherJobTimeoutMs: 100,
      watchGaps: s.watchGaps,
      recover: async (_jid, ids) => {
        asked.push(ids);
        return late && ids.includes("b") ? [{ id: "b", data: { return: "cache b" } }] : [];
      },
    });
    // the find_job publish the wait makes goes to the same `pub`: it answers with the job's jid, ignored here
    const got = collect(it);
    await new Promise((r) => setTimeout(r, 20));
    if (withGap) s.gap();
    await new Promise((r) => setTimeout(r, 150));
    s.ret("a");
    late = true; // b's return reached the cache after the first read
    const rs = await got;
    if (withGap) {
      assert.deepEqual(asked, [["a", "b"], ["b"]]);
      assert.deepEqual(shown(rs), ["a=bus a", "b=cache b"]);
    } else {
      assert.deepEqual(asked, [], "no gap: the cache is not read");
      assert.deepEqual(shown(rs), ["a=bus a", "b missing"]);
    }
  }
});
