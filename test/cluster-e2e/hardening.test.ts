/**
 * Cluster hardening (issue #13), on one cluster: three masters behind HAProxy, each with its own `cachedir`.
 *
 * 1. A minion event forging another minion's return (the `_minion_event` pretag trick) lands in no master's job
 *    cache: peers store only the job records their origin verified.
 * 2. A captured request frame (of a 3007-style v3 minion, and of a 3006.8-style v2 one) accepted by one master
 *    is refused by another master, and by the same master after a SIGKILL and restart; a fresh request from the
 *    same minion is served.
 * 3. The Raft leader, taken out of the balancer and stopped with SIGSTOP for PAUSE_MS (longer than the peer
 *    channel's liveness timeout, the ZMTP heartbeat timeout of 5 s: its peers see its sessions go down, as after
 *    the 20 s pause of the issue), gets the job run meanwhile on another master, and every return, within 10 s
 *    of SIGCONT (the README's promise), though it saw no event of them; a frame another master accepted during
 *    the pause is refused when replayed to it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import { formatJid } from "../../src/shared/protocol/jid.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, frameAnswer as answer, RET_PORT, minionEventFrame, minionThrough, clusterPrerequisites, sleep, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.70";
const HOSTS = ["127.0.0.71", "127.0.0.72", "127.0.0.73"];
const MINIONS = 3;
/** longer than the peers' heartbeat timeout (DEFAULT_PEER_LIMITS.heartbeatTimeoutMs, 5 s) */
const PAUSE_MS = 8_000;

/** A request frame as a minion sends it (and as someone on the path would capture it): the envelope's bytes. */
function frame(m: TestMinion, protocol: "v3" | "v2", nonce: string): Buffer {
  return minionEventFrame(m, protocol, nonce, `hc/replay/${protocol}`);
}


test("cluster hardening: no forged return stored, no captured frame replayed, a paused master catches up", { timeout: 240_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-hardening", privateCachedir: true });
  const minions: TestMinion[] = [];
  try {
    await h.waitLeader([0, 1, 2], 3);
    const keys = await testKeys(MINIONS);
    // the last one a 3006.8-style minion (protocol v2)
    for (let i = 0; i < MINIONS; i++) minions.push(minionThrough(LB, `hc-${i}`, keys[i]!, RET_PORT, i === MINIONS - 1 ? { protocol: "v2" } : {}));
    await Promise.all(minions.map((m) => m.start()));
    const [evil, good, old] = [minions[0]!, minions[1]!, minions[2]!];

    await t.test("a minion event forging another minion's return is stored in no master's job cache", async () => {
      // a jid of the last minute: one older than keep_jobs would be hidden by the first cleanup whether it was stored or not
      const forgedJid = formatJid(Date.now() - 60_000, 1);
      await evil.channel.send({ id: evil.id, cmd: "_minion_event", tok: evil.keys.tok, pretag: `salt/job/${forgedJid}/ret`, events: [{ tag: good.id, data: { return: "forged", retcode: 0, success: true } }] }, evil.requestOptions);
      // a real job after it: its returns reach every master, so the forged event has had its chance too
      const r = await h.salt(0, ["-L", good.id, "test.ping", "--out", "json", "-t", "15"]);
      assert.equal(r.code, 0, r.stderr);
      const jid = JSON.parse((await h.saltRun(0, ["jobs.list_jobs", "--out", "json"])).stdout);
      const real = Object.keys(jid).sort().at(-1)!;
      for (const i of [0, 1, 2]) {
        await until(`m${i + 1} to hold the real return`, async () => {
          const l = await h.controlRunner(i, "jobs.lookup_jid", [real]);
          return l[good.id] === true ? true : undefined;
        }, 15_000);
        const l = await h.saltRun(i, ["jobs.lookup_jid", forgedJid, "--out", "json"]);
        assert.deepEqual(JSON.parse(l.stdout || "{}"), {}, `m${i + 1} stored no forged return: ${l.stdout}`);
      }
    });

    await t.test("a captured frame accepted by one master: its nonce in other bytes is refused by another and by the same one after SIGKILL and a restart", async () => {
      const [origin, other] = [1, 2];
      const sender = { v3: good, v2: old };
      const nonces = { v3: newNonce(), v2: newNonce() };
      const captured = { v3: frame(good, "v3", nonces.v3), v2: frame(old, "v2", nonces.v2) };
      /** the captured nonce sealed again: other bytes (a genuine copy of the same bytes gets the first's reply: docs/security.md, "A resend") */
      const resealed = (p: "v3" | "v2") => frame(sender[p], p, nonces[p]);
      for (const p of ["v3", "v2"] as const) assert.equal(await answer(HOSTS[origin]!, captured[p]), "accepted", `${p} on m${origin + 1}`);
      await sleep(300); // the origin forwards the nonces it accepted in the same turn as the reply
      for (const p of ["v3", "v2"] as const) assert.equal(await answer(HOSTS[other]!, resealed(p)), '"bad load"', `${p} nonce replayed to m${other + 1}`);
      assert.match(readFileSync(h.masters[other]!.logFile, "utf8"), /Replayed request refused/);

      h.kill(origin, "SIGKILL");
      await h.waitExit(origin);
      await h.startMaster(origin);
      // nothing remembers the first's reply now (the origin's memory is in its process): the same bytes are refused too
      for (const p of ["v3", "v2"] as const) assert.equal(await answer(HOSTS[origin]!, captured[p]), '"bad load"', `${p} replayed to m${origin + 1} after its restart`);
      for (const p of ["v3", "v2"] as const) assert.equal(await answer(HOSTS[origin]!, resealed(p)), '"bad load"', `${p} nonce replayed to m${origin + 1} after its restart`);
      assert.match(readFileSync(h.masters[origin]!.logFile, "utf8"), /restored \d+ replay nonces/);
      // normal traffic: a fresh frame of the same minion, with the same keys, is served everywhere
      for (const host of HOSTS) for (const p of ["v3", "v2"] as const) assert.equal(await answer(host, frame(sender[p], p, newNonce())), "accepted", `a fresh ${p} frame on ${host}`);
      await h.waitLeader([0, 1, 2], 3);
    });

    await t.test("the Raft leader paused with SIGSTOP gets the jobs and returns it missed within 10 s of SIGCONT", async () => {
      const leader = await h.waitLeader([0, 1, 2], 3);
      const victim = h.masters.findIndex((m) => m.id === leader);
      const cli = (victim + 1) % 3;
      // the minions on the other two masters, so every one of them answers the job run during the pause
      await h.drain(victim);
      await until("the balancer to hold no connection to the leader", async () => {
        const s = await h.haproxyServers();
        return s.filter((x) => x.server === leader).every((x) => x.scur === 0) ? true : undefined;
      }, 20_000);

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
        return all(await h.controlRunner(cli, "jobs.lookup_jid", [jid])) ? true : undefined;
      }, 15_000);
      // a frame the others accept meanwhile: the paused master learns its nonce when it pulls
      const capturedNonce = newNonce();
      assert.equal(await answer(HOSTS[cli]!, frame(good, "v3", capturedNonce)), "accepted");
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
      // its nonce sealed again (the same bytes would get the reply the master that took them remembers)
      assert.equal(await answer(HOSTS[victim]!, frame(good, "v3", capturedNonce)), '"bad load"', "a frame accepted during the pause, its nonce replayed to the paused master");
      t.diagnostic(`paused ${PAUSE_MS} ms; caught up ${caughtUpMs} ms after SIGCONT`);
      await h.undrain(victim);
      await h.waitLeader([0, 1, 2], 3);
    });
  } finally {
    for (const i of [0, 1, 2]) h.kill(i, "SIGCONT");
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
