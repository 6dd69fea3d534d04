/**
 * A burst of the largest forwarded job returns while a long pull runs, in the one thread a master runs both in
 * (src/main-thread/state-sync-host.ts MirrorThread, under stateSyncHeapLimits): the mirror decodes each forwarded job
 * event whole, so the thread's bound must leave room for it (under 24 MiB one 16 MiB return ended the thread,
 * bench/RESULTS.md session 11; under a bound that small V8 even aborts the whole process on a 64 MiB one, session 12).
 * The puller is sent frames of frameBytesMax (64 MiB: the most a minion's frame may be) holding string returns, and one
 * of the peer channel's frame size (8 MiB) holding a return of 400,000 small maps (what expands most once decoded),
 * while it pulls `files` items: the thread may not restart, the pull installs every item, and every return it accepted
 * is in the job cache, whole.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { packEvent } from "../../src/shared/event-frame.js";
import { frameBytesMax } from "../../src/shared/protocol/limits.js";
import { formatJid } from "../../src/shared/protocol/jid.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { stateSyncHeapLimits } from "../../src/main-thread/state-sync-host.js";
import { stateSyncCfg, stateSyncPair } from "../helpers/state-sync-pair.js";

const files = 20_000;
const perDir = 1000;
/** string returns of (almost) frameBytesMax each */
const bigReturns = 3;
/** the peer channel's frame (src/workers/raft/peer/limits.ts frameBytesMax) */
const peerFrameBytes = 8 * 1024 * 1024;
/** small maps in the wide return: about 7 MiB of msgpack, ~40 MiB of objects once decoded */
const wideEntries = 400_000;

test(`a burst of ${bigReturns} forwarded returns of ${frameBytesMax / 2 ** 20} MiB and one of ${wideEntries.toLocaleString("en-US")} small maps reaches the state-sync thread while it pulls ${files.toLocaleString("en-US")} items under its old generation of ${stateSyncHeapLimits.maxOldGenerationSizeMb} MiB: it does not restart, every item and every return is stored`, { timeout: 300_000 }, async () => {
  const tmp = existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir();
  const root = mkdtempSync(path.join(tmp, "brine-statesync-burst-"));
  try {
    for (let d = 0; d < files / perDir; d++) {
      const dir = path.join(root, "a", "srv", "salt", `d${d}`);
      mkdirSync(dir, { recursive: true });
      for (let i = 0; i < perDir; i++) writeFileSync(path.join(dir, `f${i}.sls`), `item ${d}/${i}\n`);
    }
    const { a, b, stop } = await stateSyncPair(root);
    try {
      const t0 = Date.now();
      const pulled = b.link.syncFrom("a", ["file_roots"]);
      pulled.catch(() => undefined); // awaited below; a failure before that is the one reported
      // the burst lands while the pull installs
      while (!existsSync(path.join(b.roots, "d1"))) await sleep(20);
      const jid = formatJid(Date.now(), 0);
      const big = (i: number) => packEvent(`salt/job/${jid}/ret/big${i}`, { jid, id: `big${i}`, fun: "cmd.run", retcode: 0, success: true, return: String.fromCharCode(97 + i).repeat(frameBytesMax - 4096) });
      const wideReturn: Record<string, { n: number; s: string }> = {};
      for (let i = 0; i < wideEntries; i++) wideReturn[`k${i}`] = { n: i, s: "v" };
      const wide = packEvent(`salt/job/${jid}/ret/wide`, { jid, id: "wide", fun: "grains.items", retcode: 0, success: true, return: wideReturn });
      assert.ok(wide.byteLength > 6 * 1024 * 1024 && wide.byteLength <= peerFrameBytes, `the wide return's frame is ${wide.byteLength} bytes`);
      const load = packEvent(`salt/job/${jid}/new`, { jid, fun: "cmd.run", tgt: "*", tgt_type: "glob", arg: [], user: "root", minions: ["big0", "big1", "big2", "wide"] });
      b.thread.push([load]);
      for (let i = 0; i < bigReturns; i++) b.thread.push([big(i)]);
      b.thread.push([wide]);
      await b.thread.flushed(120_000);
      const r = await pulled;
      console.log(`# pulled ${files} items in ${((Date.now() - t0) / 1000).toFixed(1)} s with the burst (load ${os.loadavg()[0]!.toFixed(1)})`);
      assert.deepEqual(r.errors, []);
      assert.equal(r.items, files);
      assert.equal(a.thread.restarts + b.thread.restarts, 0, "no thread reached its bound");
      assert.equal(b.thread.dropped, 0, "the mirror accepted every batch");
      let installed = 0;
      for (const d of readdirSync(b.roots)) installed += readdirSync(path.join(b.roots, d)).length;
      assert.equal(installed, files);
      // what the mirror stored, read as another thread of the master reads it
      const jobs = new JobCache(openStore(stateSyncCfg("b", b.root)));
      assert.equal(jobs.getLoad(jid)?.fun, "cmd.run");
      const rets = jobs.returnsFor(jid);
      assert.deepEqual(Object.keys(rets).sort(), ["big0", "big1", "big2", "wide"]);
      for (let i = 0; i < bigReturns; i++) {
        const s = rets[`big${i}`]!.return as string;
        assert.equal(s.length, frameBytesMax - 4096);
        assert.equal(s[0], String.fromCharCode(97 + i));
      }
      assert.equal(Object.keys(rets.wide!.return as object).length, wideEntries);
    } finally {
      await stop();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
