/**
 * A master that was paused catches up (issue #13): three masters behind HAProxy, each with its own `cachedir`.
 * The Raft leader is taken out of the balancer and stopped with SIGSTOP for PAUSE_MS, longer than the peer
 * channel's liveness timeout (the ZMTP heartbeat timeout, 5 s: its peers see its sessions go down, as they do
 * after a 20 s pause); a job runs on another master meanwhile. After SIGCONT the paused master rejoins, and the
 * job and every return reach its job cache within 10 s (the README's promise), though it saw no event of them.
 * Before the pause, a minion event forging another minion's return lands in no master's job cache.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, skipReason, sleep, until } from "../../src/cluster/local-cluster.js";

const LB = "127.0.0.70";
const HOSTS = ["127.0.0.71", "127.0.0.72", "127.0.0.73"];
const MINIONS = 3;
/** longer than the peers' heartbeat timeout (DEFAULT_PEER_LIMITS.heartbeatTimeoutMs, 5 s) */
const PAUSE_MS = 8_000;

test("a master paused with SIGSTOP (the leader) gets the jobs and returns it missed within 10 s of SIGCONT", { timeout: 180_000 }, async (t) => {
  const why = await skipReason(LB, HOSTS);
  if (why) {
    t.skip(why);
    return;
  }
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-paused", privateCachedir: true });
  const minions: TestMinion[] = [];
  try {
    const leader = await h.waitLeader([0, 1, 2], 3);
    const victim = h.masters.findIndex((m) => m.id === leader);
    const cli = (victim + 1) % 3;
    // the minions on the other two masters, so every one of them answers the job run during the pause
    await h.drain(victim);
    const keys = await testKeys(MINIONS);
    for (let i = 0; i < MINIONS; i++) minions.push(minionThrough(LB, `pm-${i}`, keys[i]!));
    await Promise.all(minions.map((m) => m.start()));

    // a minion forges another's return with a minion event (the pretag trick): no master's job cache stores it
    const [evil, good] = [minions[0]!, minions[1]!];
    const forgedJid = "20260101000000000001";
    await evil.channel.send({ id: evil.id, cmd: "_minion_event", tok: evil.keys.tok, pretag: `salt/job/${forgedJid}/ret`, events: [{ tag: good.id, data: { return: "forged", retcode: 0, success: true } }] }, evil.requestOptions);
    const real = await h.salt(cli, ["-L", good.id, "test.ping", "--out", "json", "-t", "15"]);
    assert.equal(real.code, 0, real.stderr);
    for (const i of [0, 1, 2]) {
      const l = await h.saltRun(i, ["jobs.lookup_jid", forgedJid, "--out", "json"]);
      assert.deepEqual(JSON.parse(l.stdout || "{}"), {}, `m${i + 1} stored no forged return: ${l.stdout}`);
    }

    h.kill(victim, "SIGSTOP");
    const pausedAt = Date.now();
    // the job runs once the others count the paused master's sessions down (nothing is forwarded to it then)
    await until(`m${cli + 1} to see ${leader} down`, async () => {
      const mem = await h.clusterRunner(cli, "members");
      return mem.unhealthy_voters.includes(leader) ? true : undefined;
    }, PAUSE_MS);
    const r = await h.salt(cli, ["*", "test.ping", "--async"]);
    const jid = /job ID: (\d{20})/.exec(r.stdout)?.[1];
    assert.ok(jid, `a jid: ${r.stdout}${r.stderr}`);
    const all = (got: Record<string, unknown>) => minions.every((m) => got[m.id] === true);
    await until("every return on the CLI's master", async () => {
      const l = await h.saltRun(cli, ["jobs.lookup_jid", jid, "--out", "json"]);
      return all(JSON.parse(l.stdout)) ? true : undefined;
    }, 15_000);
    await sleep(Math.max(0, PAUSE_MS - (Date.now() - pausedAt)));
    h.kill(victim, "SIGCONT");
    const resumedAt = Date.now();

    await until(`the paused master ${leader} to hold the job and every return`, async () => {
      const l = await h.saltRun(victim, ["jobs.lookup_jid", jid, "--out", "json"], 10_000);
      return l.code === 0 && all(JSON.parse(l.stdout)) ? true : undefined;
    }, 10_000, 200);
    const caughtUpMs = Date.now() - resumedAt;
    const listed = await h.saltRun(victim, ["jobs.list_jobs", "--out", "json"]);
    assert.ok(jid in JSON.parse(listed.stdout), `the job's load on ${leader}: ${listed.stdout}`);
    t.diagnostic(`paused ${PAUSE_MS} ms; caught up ${caughtUpMs} ms after SIGCONT`);
    await h.waitLeader([0, 1, 2], 3);
  } finally {
    h.kill(0, "SIGCONT");
    h.kill(1, "SIGCONT");
    h.kill(2, "SIGCONT");
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
