/**
 * Maps and arrays of any size cross the control socket, and the CLIs print every byte of them whatever
 * stdout is. Before: the control socket's encoder had msgpackr's 16-bit map size limit, so `jobs.list_jobs`
 * with more than 65,535 jobs in the cache, or `jobs.lookup_jid` on a return with 70,000 keys, threw "Object is
 * too large to serialize with fast 16-bit map size" in the master's main thread and the master exited; and
 * `salt-run`/`salt` called process.exit right after writing, so through a pipe they stopped at 64 KiB with exit 0.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { controlCall } from "../../src/lib/client/control-client.js";
import { formatResult } from "../../src/lib/output/outputters.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { formatJid } from "../../src/shared/protocol/jid.js";

const JOBS = 100_000;
// jids of the last hour: keep_jobs (24 h) hides older ones from the first cleanup on, whatever the date the suite runs
const t0 = Date.now() - 3600_000;
const jidOf = (i: number) => formatJid(t0 + Math.floor(i / 1000), i % 1000);

describe("the control socket carries any size and the CLIs print all of it", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let conf: string;
  let store: Store;
  let jobs: JobCache;

  before(async () => {
    tm = await startTestMaster({ auto_accept: true });
    conf = writeConfigDir(tm);
    store = openStore(tm.cfg);
    jobs = new JobCache(store);
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < JOBS; i++) writes.push(store.loads.put(jidOf(i), { fun: "test.ping", arg: [], tgt: "*", tgt_type: "glob", user: "root", jid: jidOf(i) }));
    await Promise.all(writes);
  });
  after(async () => {
    await store.close();
    await tm.stop();
  });

  test(`jobs.list_jobs with ${JOBS} jobs in the cache answers with all of them and the master serves on`, async () => {
    const r = await controlCall(tm.sockDir, { op: "run", fun: "jobs.list_jobs", arg: [], kwarg: {} });
    assert.equal(r.type, "return", r.message);
    assert.equal(Object.keys(r.ret as object).length, JOBS);
    const status = await controlCall(tm.sockDir, { op: "status" });
    assert.equal(status.type, "return");
  });

  test("jobs.lookup_jid on a return with 100,000 keys answers with every key, through salt-run and a pipe", async () => {
    const jid = jidOf(JOBS + 1);
    const ret: Record<string, number> = {};
    for (let i = 0; i < 100_000; i++) ret[`key${i}`] = i;
    assert.equal(await jobs.saveReturn(jid, "big-minion", { return: ret }, false), true);
    const r = await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", jid, "--out", "json"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(Object.keys(JSON.parse(r.stdout)["big-minion"]).length, 100_000);
  });

  test("salt-run prints a 10 MB return completely through a pipe", async () => {
    const jid = jidOf(JOBS + 2);
    const big = "x".repeat(10_000_000);
    assert.equal(await jobs.saveReturn(jid, "m1", { return: big }, false), true);
    const r = await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", jid, "--out", "json"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(Buffer.byteLength(r.stdout), Buffer.byteLength(formatResult("json", { m1: big }) + "\n"));
  });

  test("salt prints a minion's 10 MB return completely through a pipe", async () => {
    const big = "y".repeat(10_000_000);
    const [k] = await testKeys(1);
    const m: TestMinion = fastMinion(tm, "big-return", k!, { grains: { id: "big-return", big } });
    await m.start();
    try {
      const r = await runCli("salt", ["-c", conf, "big-return", "grains.get", "big", "--out", "json", "-t", "30"]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(Buffer.byteLength(r.stdout), Buffer.byteLength(formatResult("json", { "big-return": big }) + "\n"));
    } finally {
      await m.stop();
    }
  });
});
