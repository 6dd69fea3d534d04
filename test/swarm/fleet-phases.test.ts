/**
 * The swarm's phase controls that bench/cpu-per-op.ts measures with: every minion signs in again on demand, and
 * minions hold the returns of the jobs they run until told to send them (so a publish is measured apart from its
 * returns), each held return then arriving as it would have.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import os from "node:os";
import path from "node:path";
import { ensureKeyPool } from "../../src/lib/minion/keys.js";
import { Fleet } from "../../tools/swarm/fleet.js";
import { PublishClient } from "../../tools/swarm/publish-client.js";
import { startTestMaster } from "../helpers/master.js";

const KEYS = path.join(os.tmpdir(), "brine-test-swarm-keys");

test("a fleet signs every minion in again on demand, and holds a job's returns until told to send them", { timeout: 120_000 }, async () => {
  const tm = await startTestMaster({ auto_accept: true });
  await ensureKeyPool(3, { dir: KEYS });
  const fleet = new Fleet({
    settings: {
      master: "127.0.0.1", retPort: tm.retPort, protocol: "v3", keyDir: KEYS, idPrefix: "ph-", idWidth: 5,
      acceptanceWaitMs: 200, acceptanceWaitMaxMs: 0, authDeadlineMs: 60_000, authTimeoutMs: 10_000, authTries: 3,
      requestTimeoutMs: 20_000, requestTries: 2, randomReauthDelayMs: 0, reconDefaultMs: 100, reconMaxMs: 200, pubMonitor: true, sourceIps: 0,
    },
    minions: 3,
    procs: 1,
  });
  const col = fleet.collector;
  const pc = new PublishClient({ host: "127.0.0.1", port: tm.retPort, key: tm.rootKey });
  try {
    await fleet.init();
    fleet.startAll();
    assert.ok(await col.waitFor(() => col.upCount === 3, 60_000), "all three started");
    assert.deepEqual(fleet.pids(), [process.pid], "one in-process slice");
    const accepted = () => col.authResults.get("accepted") ?? 0;
    const before = accepted();
    await fleet.reauthAll(2);
    assert.equal(accepted() - before, 3, "each minion signed in once more");

    fleet.holdReturns(true);
    await new Promise((r) => setTimeout(r, 100));
    const reply = await pc.publish({ tgt: "ph-*", fun: "test.ping" });
    const job = col.addJob(reply.jid, "test.ping", Date.now(), [0, 1, 2]);
    assert.ok(await col.waitFor(() => job.received.size === 3, 20_000), "every minion got the publish");
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(job.returned.size, 0, "no return while they hold them");
    fleet.holdReturns(false);
    await fleet.sendHeldReturns(8);
    assert.ok(await col.waitFor(() => job.returned.size === 3, 20_000), "the held returns arrive");
    assert.equal(col.errorCount, 0);
  } finally {
    pc.close();
    await fleet.shutdown();
    await tm.stop();
  }
});
