/**
 * One slow request does not hold a whole batch (issue 13): frames are batched per lane, and a batch's
 * replies used to go together when its slowest frame was done. Here a `_return` waits for the job cache
 * (another process holds LMDB's write lock for 3 s) while `_master_opts` requests of the same batch
 * have their answers at once. Also: `worker_threads` is honoured, with Salt's default of 5.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import type { RequestLanes } from "../../src/main-thread/req-pool.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys, v3RequestFrame } from "../helpers/minions.js";
import { holdWriteLock } from "../helpers/lmdb-lock.js";

const LOCK_MS = 3000;

describe("one slow request does not hold its batch", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let m: TestMinion;
  let k: MinionKeys[];
  let raw: RawClient;
  before(async () => {
    tm = await startTestMaster({ auto_accept: true, worker_threads: 1 });
    k = await testKeys(1);
    m = fastMinion(tm, "slowbatch", k[0]!);
    await m.start();
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 20_000 });
  });
  after(async () => {
    raw.close();
    await m.stop();
    await tm.stop();
  });

  test("worker_threads is honoured, Salt's 5 by default", () => {
    assert.equal(masterDefaults().worker_threads, 5);
    assert.deepEqual((tm.server as unknown as { lanes: RequestLanes<unknown> }).lanes.threads, { clear: 1, req: 1 });
  });

  test("a _return waiting on a locked job cache; the _master_opts beside it in the batch are answered at once", async () => {
    const frame = (load: Record<string, unknown>) => v3RequestFrame(m, k[0]!, load);
    const ret = frame({ cmd: "_return", jid: "20260101000000000099", fun: "test.ping", fun_args: [], return: true, retcode: 0, success: true });
    const opts = Array.from({ length: 8 }, () => frame({ cmd: "_master_opts" }));
    const holder = await holdWriteLock(path.join(tm.cachedir, "brine-lmdb"), LOCK_MS);
    try {
      const t0 = performance.now();
      for (const f of [ret, ...opts]) await raw.sendOnly([Buffer.alloc(0), f]);
      const arrivals: number[] = [];
      for (let i = 0; i < 9; i++) {
        await raw.receive(20_000);
        arrivals.push(performance.now() - t0);
      }
      // eight replies well before the lock goes, the return's after it
      assert.ok(arrivals[7]! < LOCK_MS / 2, `replies at ${arrivals.map(Math.round).join(", ")} ms`);
      assert.ok(arrivals[8]! > LOCK_MS / 2, `replies at ${arrivals.map(Math.round).join(", ")} ms`);
    } finally {
      holder.kill();
    }
  });
});
