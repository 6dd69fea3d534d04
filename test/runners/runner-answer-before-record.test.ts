/**
 * A runner call's caller is answered as soon as the result is encoded; the call's job record (as Salt's
 * RunnerClient stores it) is committed after, and `salt/run/<jid>/ret` is fired only then: a reader woken by that
 * event finds the job, and a caller that closes its connection once answered (salt-run does) does not cut the
 * record short.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import { controlCall } from "../../src/lib/client/control-client.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { startTestMaster } from "../helpers/master.js";

test("salt/run/<jid>/ret comes once the job record is readable, though the caller was answered and left before", { timeout: 60_000 }, async () => {
  const tm = await startTestMaster();
  const store = openStore(tm.cfg);
  const jobs = new JobCache(store);
  const ec = new EventClient(tm.sockDir);
  await ec.connect();
  /** per ret event: whether the job's load and return were in the cache when it arrived */
  const seen: { jid: string; load: boolean; ret: unknown; said: unknown }[] = [];
  ec.on((e: BusEvent) => {
    const m = /^salt\/run\/(\d{20})\/ret$/.exec(e.tag);
    // the master's return is the call's record, Salt's {fun, jid, user, fun_args, _stamp, return, success}
    if (m) seen.push({ jid: m[1]!, load: jobs.hasLoad(m[1]!), ret: (jobs.returnsFor(m[1]!)[tm.cfg.id]?.return as { return?: unknown } | undefined)?.return, said: e.data.return });
  });
  try {
    for (let i = 0; i < 3; i++) {
      const r = await controlCall(tm.sockDir, { op: "run", fun: "test.arg", arg: [`call ${i}`], kwarg: {} });
      assert.equal(r.type, "return", r.message);
    }
    for (let t = 0; t < 100 && seen.length < 3; t++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(seen.length, 3, "one ret event per call");
    // each call's record commits on its own runner thread after its caller is answered: the events may come in
    // any order, each with its own job's return already stored
    for (const s of seen) {
      assert.equal(s.load, true, `${s.jid}: the load is stored before the event`);
      assert.deepEqual(s.ret, s.said, `${s.jid}: the return is stored before the event`);
    }
    assert.deepEqual(seen.map((s) => (s.ret as { args: string[] }).args[0]).sort(), ["call 0", "call 1", "call 2"]);
  } finally {
    ec.close();
    await store.close();
    await tm.stop();
  }
});
