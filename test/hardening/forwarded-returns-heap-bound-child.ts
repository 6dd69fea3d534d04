/**
 * The child of forwarded-returns-heap-bound.test.ts, run in a process of its own because what it checks is that V8
 * does not abort that process: a master's state-sync thread (MirrorThread, under stateSyncHeapLimits) is handed at
 * once BIG (argv[2]) forwarded returns of msgpackElementsMax empty maps each (the most a minion's return may hold, the
 * costliest element once decoded), then one of twice that (more than any minion may send: refused), then a small one.
 * Prints one JSON line of what it saw; exits 0 when it got that far.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { packEvent } from "../../src/shared/event-frame.js";
import { msgpackElementsMax } from "../../src/shared/protocol/limits.js";
import { formatJid } from "../../src/shared/protocol/jid.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { stateSyncCfg, stateSyncPair } from "../helpers/state-sync-pair.js";

/** how many of the largest returns are in flight at once (argv[2]) */
const BIG = Number(process.argv[2]);

const tmp = os.platform() === "linux" ? "/dev/shm" : os.tmpdir();
const root = mkdtempSync(path.join(tmp, "brine-heapbound-"));
try {
  const { b, stop } = await stateSyncPair(root);
  const jid = formatJid(Date.now(), 0);
  const ret = (id: string, n: number) => packEvent(`salt/job/${jid}/ret/${id}`, { jid, id, fun: "test.arg", retcode: 0, success: true, return: new Array(n).fill({}) });
  const ids = [...Array(BIG).keys()].map((i) => `max${i}`);
  b.thread.push([packEvent(`salt/job/${jid}/new`, { jid, fun: "test.arg", tgt: "*", tgt_type: "glob", arg: [], user: "root", minions: [...ids, "over", "small"] })]);
  // every largest return in flight in the thread at once (each its own call, as peers' batches arrive)
  for (const id of ids) b.thread.push([ret(id, msgpackElementsMax - 16)]);
  b.thread.push([ret("over", 2 * msgpackElementsMax)]);
  b.thread.push([ret("small", 3)]);
  await b.thread.flushed(240_000);
  const restarts = b.thread.restarts;
  const dropped = b.thread.dropped;
  await stop();
  const jobs = new JobCache(openStore(stateSyncCfg("b", b.root)));
  const stored: Record<string, number> = {};
  jobs.eachReturn(jid, (id, rec) => (stored[id] = Array.isArray(rec.return) ? rec.return.length : -1));
  console.log(JSON.stringify({ restarts, dropped, stored }));
} finally {
  rmSync(root, { recursive: true, force: true });
}
