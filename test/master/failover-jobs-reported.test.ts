/**
 * Multi-master failover, from the masters' side: two brine masters sharing the master key, a minion that moves
 * from the first to the second when the first dies and back when it returns (as `master_type: failover` does;
 * here the test moves it, the masters cannot tell the difference). Every job published on the master it moves
 * to while it moves is either answered or reported "[Not connected]" by the `salt` CLI: a job published before
 * it arrived never reaches it, even when it arrives before the wait ends, and is never left as "[No response]"
 * or missing from the output. A minion that stays on each master answers every job.
 */
import { test, describe, after } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { jsonDocs, runCli, writeConfigDir } from "../helpers/cli.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { EventClient } from "../../src/lib/client/event-client.js";

const MOVER = { id: "fo-mover", ip: "127.0.0.83" };
/** Jobs published on the master the minion moves to: before it arrives (seen published), as it arrives, after. */
const BEFORE = 3;
const DURING = 2;
const AFTER = 2;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("jobs published while a failover minion moves between two masters", { timeout: 240_000 }, () => {
  let a: TestMaster | undefined;
  let b: TestMaster | undefined;
  const minions: TestMinion[] = [];
  after(async () => {
    for (const m of minions) await m.stop().catch(() => undefined);
    await a?.stop().catch(() => undefined);
    await b?.stop().catch(() => undefined);
  });

  const minionOn = (m: TestMaster, id: string, ip: string, keys: MinionKeys) => {
    const mn = fastMinion(m, id, keys, { sourceIp: ip, grains: { id, ipv4: [ip] } });
    minions.push(mn);
    return mn;
  };

  /**
   * Jobs on `to` targeting the mover and `steady`: BEFORE published (their salt/job/<jid>/new seen) before the
   * mover arrives, DURING started as it arrives, AFTER started once it signed in.
   */
  async function jobsDuringMove(to: TestMaster, steady: string, arrive: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
    const conf = writeConfigDir(to);
    const bus = new EventClient(to.sockDir);
    await bus.connect();
    let published = 0;
    bus.on((e) => /^salt\/job\/\d+\/new$/.test(e.tag) && published++);
    const job = async (when: string) => {
      const r = await runCli("salt", ["-c", conf, "-L", `${MOVER.id},${steady}`, "test.ping", "--out", "json", "-t", "4", "--gather-job-timeout", "2"]);
      return { when, ...jsonDocs(r.stdout), stderr: r.stderr };
    };
    try {
      const runs = Array.from({ length: BEFORE }, () => job("before"));
      for (const end = Date.now() + 60_000; published < BEFORE && Date.now() < end; ) await sleep(50);
      assert.equal(published, BEFORE, "the first jobs were published before the minion arrived");
      runs.push(...Array.from({ length: DURING }, () => job("during")));
      await arrive();
      runs.push(...Array.from({ length: AFTER }, () => job("after")));
      return await Promise.all(runs);
    } finally {
      bus.close();
    }
  }

  function check(results: Record<string, unknown>[], steady: string): void {
    const outcomes = results.map((r) => `${String(r.when)}: ${String(r[MOVER.id])}`);
    for (const r of results) {
      assert.equal(r[steady], true, `the minion that stays answers every job: ${JSON.stringify(r)}`);
      assert.ok(r[MOVER.id] === true || r[MOVER.id] === "Minion did not return. [Not connected]", `the moving minion answered or is reported not connected, never lost: ${JSON.stringify(r)}`);
    }
    for (const r of results.filter((x) => x.when === "before")) assert.equal(r[MOVER.id], "Minion did not return. [Not connected]", `a job published before it arrived is reported: ${outcomes.join("; ")}`);
    for (const r of results.filter((x) => x.when === "after")) assert.equal(r[MOVER.id], true, `a job published after it arrived is answered: ${outcomes.join("; ")}`);
  }

  test("to the second master when the first dies, and back when the first returns", async () => {
    a = await startTestMaster({ auto_accept: true, worker_threads: 2 });
    // the second master shares the first's key (Salt's multi-master tutorial)
    const rootB = mkdtempSync(path.join(os.tmpdir(), "brine-fo2-"));
    mkdirSync(path.join(rootB, "pki", "master"), { recursive: true });
    for (const f of ["master.pem", "master.pub"]) copyFileSync(path.join(a.pkiDir, f), path.join(rootB, "pki", "master", f));
    const [kMover, kA, kB] = await testKeys(3);
    // and has the moving minion's key accepted already, as the tutorial says (a shared pki_dir, or accepted on each)
    mkdirSync(path.join(rootB, "pki", "master", "minions"), { recursive: true });
    writeFileSync(path.join(rootB, "pki", "master", "minions", MOVER.id), kMover!.publicPem);
    b = await startTestMaster({ auto_accept: true, worker_threads: 2 }, rootB);
    await Promise.all([minionOn(a, "fo-steady-a", "127.0.0.81", kA!).start(), minionOn(b, "fo-steady-b", "127.0.0.82", kB!).start()]);
    let mover = minionOn(a, MOVER.id, MOVER.ip, kMover!);
    await mover.start();

    // the first master dies: the minion leaves it and signs in to the second
    await a.stop(true);
    await mover.stop();
    const toB = await jobsDuringMove(b, "fo-steady-b", () => (mover = minionOn(b!, MOVER.id, MOVER.ip, kMover!)).start());
    check(toB, "fo-steady-b");

    // the first master returns (same keys and job cache): the minion fails back to it
    a = await a.restart();
    const steadyA = minions.find((m) => m.id === "fo-steady-a")!;
    await steadyA.stop();
    await minionOn(a, "fo-steady-a", "127.0.0.81", kA!).start();
    await mover.stop();
    const toA = await jobsDuringMove(a, "fo-steady-a", () => minionOn(a!, MOVER.id, MOVER.ip, kMover!).start());
    check(toA, "fo-steady-a");
  });
});
