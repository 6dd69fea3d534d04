/**
 * Clustered, a minion's peer job (publish.publish) can be polled on any master: a peer stores the job's load from
 * the origin's verified `salt/job/<jid>/new` event, which names the publishing minion, so its `pub_ret` answers
 * that minion the returns and refuses every other minion. With `jobs` placed on a ring, a master that holds
 * neither the load nor the returns (they live on the job's owners) answers them from the cluster-wide read.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { packEvent } from "../../src/shared/event-frame.js";
import { JobRecords } from "../../src/workers/state-sync/job-records.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { doPubRet } from "../../src/workers/req-handler/peer-publish.js";
import type { MasterContext } from "../../src/workers/req-handler/context.js";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { jobReadsChannel, serveJobReads } from "../../src/shared/cluster-job-reads.js";
import type { JobCopy } from "../../src/shared/placement.js";

const JID = "20261125120000000001";

test("a peer's pub_ret answers the minion that published the job, from the load the new event carried", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-peerjob-"));
  const cfg = { ...masterDefaults(), cachedir: dir };
  const store = openStore(cfg);
  try {
    const jr = new JobRecords(store, cfg);
    await jr.storeEvents([
      packEvent(`salt/job/${JID}/new`, { jid: JID, tgt_type: "glob", tgt: "a2", user: "root", fun: "test.ping", arg: [], minions: ["a2"], missing: [], id: "a1" }),
      packEvent(`salt/job/${JID}/ret/a2`, { id: "a2", jid: JID, fun: "test.ping", fun_args: [], return: true, retcode: 0, success: true }),
    ]);
    const ctx = { jobs: jr.jobs } as unknown as MasterContext;
    assert.deepEqual((await doPubRet(ctx, { cmd: "pub_ret", id: "a1", jid: JID, tok: "t" })).ret, { a2: { ret: true } });
    assert.deepEqual((await doPubRet(ctx, { cmd: "pub_ret", id: "a2", jid: JID, tok: "t" })).ret, {});
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("with jobs placed on a ring, pub_ret answers the returns held on the job's owners, and still only to its publisher", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-peerjob-"));
  const cfg = { ...masterDefaults(), cachedir: dir, sock_dir: path.join(dir, "sock"), ret_port: 45999 };
  const store = openStore(cfg);
  // the main thread's side: the cluster's merged copy of the job (this master holds nothing of it)
  const main = jobReadsChannel(cfg);
  const asked: string[] = [];
  serveJobReads(main, async (jid): Promise<{ job: JobCopy; unreachable: Record<string, string> }> => {
    asked.push(jid);
    return {
      job: jid === JID ? { load: { jid: JID, fun: "test.ping", tgt: "a*", id: "a1" }, minions: ["a2", "a3"], returns: { a2: { return: true }, a3: { return: "x", out: "txt" } } } : { returns: {} },
      unreachable: { m2: "down (no peer session)" },
    };
  });
  try {
    const ctx = { cfg, jobs: new JobCache(store, () => true) } as unknown as MasterContext;
    assert.equal(ctx.jobs.getLoad(JID), undefined, "this master holds no copy");
    assert.deepEqual((await doPubRet(ctx, { cmd: "pub_ret", id: "a1", jid: JID, tok: "t" })).ret, { a2: { ret: true }, a3: { ret: "x", out: "txt" } });
    assert.deepEqual((await doPubRet(ctx, { cmd: "pub_ret", id: "a2", jid: JID, tok: "t" })).ret, {}, "another minion is refused");
    assert.deepEqual(asked, [JID, JID]);
    // not placed: this master's cache only, nothing asked
    const local = { cfg, jobs: new JobCache(store) } as unknown as MasterContext;
    assert.deepEqual((await doPubRet(local, { cmd: "pub_ret", id: "a1", jid: JID, tok: "t" })).ret, {});
    assert.equal(asked.length, 2);
  } finally {
    main.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a malformed cluster-wide job read is answered with a clear error, and the main thread's relay is not asked", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-peerjob-"));
  const cfg = { ...masterDefaults(), cachedir: dir, sock_dir: path.join(dir, "sock"), ret_port: 45998 };
  const main = jobReadsChannel(cfg);
  const worker = jobReadsChannel(cfg);
  worker.ref(); // the channels are unref'd: keep the test's event loop alive for the answer
  let asked = 0;
  serveJobReads(main, async () => {
    asked++;
    return { job: { returns: {} }, unreachable: {} };
  });
  try {
    const answer = new Promise<unknown>((resolve) => {
      worker.onmessage = (e: unknown) => resolve((e as { data: unknown }).data);
    });
    worker.postMessage({ k: "read", from: "w1", id: 7, jid: "../../etc/passwd" });
    assert.deepEqual(await answer, { k: "err", to: "w1", id: 7, code: "PLACEMENT_BAD_MESSAGE", text: "a job read names no jid" });
    assert.equal(asked, 0);
  } finally {
    main.close();
    worker.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
