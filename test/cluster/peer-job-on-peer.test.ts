/**
 * Clustered, a minion's peer job (publish.publish) can be polled on any master: a peer stores the job's load from
 * the origin's verified `salt/job/<jid>/new` event, which names the publishing minion, so its `pub_ret` answers
 * that minion the returns and refuses every other minion.
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
    assert.deepEqual(doPubRet(ctx, { cmd: "pub_ret", id: "a1", jid: JID, tok: "t" }).ret, { a2: { ret: true } });
    assert.deepEqual(doPubRet(ctx, { cmd: "pub_ret", id: "a2", jid: JID, tok: "t" }).ret, {});
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
