/**
 * A minion's sign-in under a master that does not answer in time, as Salt's minions retry it (salt/crypt.py
 * `AsyncAuth._authenticate`/`sign_in`, salt/transport/zeromq.py, salt/minion.py `_connect_minion`), seen from a
 * ROUTER the test controls (brine's own ZMTP server, which says which connection each request came on):
 * - 3007.x: one payload sent `auth_tries` times, each try on a new connection (and one more, idle, after the last);
 *   once all timed out, a new sign-in (new nonce, new connection) after `acceptance_wait_time` — what a real 3007.x
 *   minion did against a master that never answers (bench/RESULTS.md, "An auth storm");
 * - 3006.8: the tries of one payload stay on one connection, each sent after the reply to the one before;
 * - a reply that is not a sign-in reply (a busy master's `{"error": …}`) ends the sign-in: a new one, on a new
 *   channel, after `acceptance_wait_time`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { NativeRouter } from "../../src/main-thread/zmtp-server.js";
import { TestMinion } from "../../src/lib/minion/test-minion.js";
import { decodeWire, encodeWire, isMap } from "../../src/shared/protocol/msgpack.js";
import { isBrineError } from "../../src/shared/errors.js";
import { freePort } from "../../tools/free-port.js";
import { testKeys } from "../helpers/minions.js";

interface Seen {
  conn: number;
  nonce: string;
  at: number;
}

/** A ROUTER that records each sign-in (its connection, its nonce) and answers it after `replyAfterMs` (never: undefined). */
async function signInRecorder(replyAfterMs?: number) {
  const port = await freePort();
  const seen: Seen[] = [];
  const router: NativeRouter = new NativeRouter({ backlog: 64 }, (frames) => {
    const body = frames[frames.length - 1]!;
    const env = decodeWire(body);
    const load = isMap(env) && isMap(env.load) ? env.load : {};
    seen.push({ conn: frames[0]!.readUInt32BE(1), nonce: String(load.nonce), at: performance.now() });
    if (replyAfterMs !== undefined) setTimeout(() => router.push([...frames.slice(0, -1), encodeWire({ error: "busy" })]), replyAfterMs);
  });
  await router.bind(`tcp://127.0.0.1:${port}`);
  router.start();
  return { port, seen, router };
}

function minion(port: number, protocol: "v3" | "v2", keys: Awaited<ReturnType<typeof testKeys>>[number], o: { timeoutMs: number; tries: number; waitMs: number; deadlineMs: number }): TestMinion {
  return new TestMinion({
    id: `retry-${protocol}`,
    master: "127.0.0.1",
    retPort: port,
    protocol,
    keys,
    authTimeoutMs: o.timeoutMs,
    authTries: o.tries,
    acceptanceWaitMs: o.waitMs,
    authDeadlineMs: o.deadlineMs,
    pubMonitor: false,
  });
}

/** The sign-ins in the order seen, grouped by nonce. */
function byNonce(seen: Seen[]): Seen[][] {
  const groups = new Map<string, Seen[]>();
  for (const s of seen) {
    let g = groups.get(s.nonce);
    if (!g) groups.set(s.nonce, (g = []));
    g.push(s);
  }
  return [...groups.values()];
}

test("a 3007 minion sends a timed-out sign-in again on a new connection each try, then signs in anew after acceptance_wait_time", async () => {
  const [keys] = await testKeys(1);
  const m = await signInRecorder();
  // the deadline leaves room for a slow first sign-in (three connections and tries at a loaded box's pace: 1.8 s in a
  // CI run) and the wait before the next: a minion gives up rather than start a sign-in past its deadline
  const o = { timeoutMs: 300, tries: 3, waitMs: 800, deadlineMs: 6_000 };
  const mi = minion(m.port, "v3", keys!, o);
  try {
    await assert.rejects(mi.start(), (e) => isBrineError(e, "MINION_AUTH_TIMEOUT"));
    const groups = byNonce(m.seen);
    assert.ok(groups.length >= 2, `two sign-ins at least within the deadline, saw ${groups.length}`);
    const [first, second] = groups as [Seen[], Seen[]];
    assert.equal(first.length, o.tries, "the first payload was sent once per try");
    assert.equal(new Set(first.map((s) => s.conn)).size, o.tries, "each try on a connection of its own");
    assert.ok(!first.some((s) => second.some((t) => t.conn === s.conn)), "the next sign-in on a new connection too");
    // routing ids count connections: like a real 3007 minion, one more connection is opened after the last try's
    // timeout and carries nothing (its channel is closed), so the next sign-in's is the second one after
    assert.equal((second[0]!.conn - first[first.length - 1]!.conn) >>> 0, 2, "one idle connection between the two sign-ins");
    const gap = second[0]!.at - first[first.length - 1]!.at;
    assert.ok(gap >= o.timeoutMs + o.waitMs - 60, `the next sign-in came after the last try's timeout and acceptance_wait_time (${gap.toFixed(0)} ms)`);
  } finally {
    await mi.stop();
    m.router.close();
  }
});

test("a 3006.8 minion keeps its connection for the tries of a sign-in, each sent after the reply to the one before", async () => {
  const [keys] = await testKeys(1);
  // each reply comes after the try's timeout: the next try waits for it on the same connection
  const m = await signInRecorder(450);
  const o = { timeoutMs: 300, tries: 3, waitMs: 5_000, deadlineMs: 3_000 };
  const mi = minion(m.port, "v2", keys!, o);
  try {
    await assert.rejects(mi.start(), (e) => isBrineError(e, "MINION_AUTH_TIMEOUT"));
    const groups = byNonce(m.seen);
    assert.equal(groups.length, 1, "one sign-in within the deadline (the next one waits acceptance_wait_time)");
    const tries = groups[0]!;
    assert.ok(tries.length >= 2, `the payload was sent again, saw ${tries.length}`);
    assert.equal(new Set(tries.map((s) => s.conn)).size, 1, "all its tries on one connection");
    for (let i = 1; i < tries.length; i++) {
      assert.ok(tries[i]!.at - tries[i - 1]!.at >= 450 - 30, "a try was sent only once the reply to the one before had come");
    }
  } finally {
    await mi.stop();
    m.router.close();
  }
});

test("a busy master's error reply ends the sign-in: the next one comes on a new channel after acceptance_wait_time", async () => {
  const [keys] = await testKeys(1);
  const m = await signInRecorder(0);
  const o = { timeoutMs: 2_000, tries: 7, waitMs: 400, deadlineMs: 1_500 };
  const mi = minion(m.port, "v3", keys!, o);
  try {
    await assert.rejects(mi.start(), (e) => isBrineError(e, "MINION_AUTH_INVALID"));
    const groups = byNonce(m.seen);
    assert.ok(groups.length >= 2 && groups.length <= 4, `a sign-in every ~400 ms within 1.5 s, saw ${groups.length}`);
    for (const g of groups) assert.equal(g.length, 1, "an answered payload is not sent again");
    assert.equal(new Set(m.seen.map((s) => s.conn)).size, m.seen.length, "each sign-in on a channel of its own");
    for (let i = 1; i < m.seen.length; i++) assert.ok(m.seen[i]!.at - m.seen[i - 1]!.at >= o.waitMs - 40, "acceptance_wait_time between them");
  } finally {
    await mi.stop();
    m.router.close();
  }
});
