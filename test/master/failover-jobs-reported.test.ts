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

const MOVER = { id: "fo-mover", ip: "127.0.0.83" };
/** When the jobs are published on the master the minion moves to, ms after the other master died (or the move began). */
const PUBLISH_AT_MS = [0, 500, 1000, 1500, 4500, 5500, 6500];
/** When the minion arrives there (as a failover minion does after master_alive_interval); a CLI needs ~1-2 s to publish. */
const ARRIVES_AT_MS = 3500;

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

  /** The jobs of PUBLISH_AT_MS on `to` (targeting the mover and `steady`), the mover arriving at ARRIVES_AT_MS. */
  async function jobsDuringMove(to: TestMaster, steady: string, arrive: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
    const conf = writeConfigDir(to);
    const t0 = Date.now();
    const runs = PUBLISH_AT_MS.map(async (at) => {
      await sleep(at);
      const r = await runCli("salt", ["-c", conf, "-L", `${MOVER.id},${steady}`, "test.ping", "--out", "json", "-t", "2", "--gather-job-timeout", "1", "--show-jid"]);
      const jid = /jid: (\d+)/.exec(r.stdout)?.[1];
      return { at, jid, ...jsonDocs(r.stdout.replace(/^jid: \d+\n/, "")), stderr: r.stderr };
    });
    await sleep(ARRIVES_AT_MS - (Date.now() - t0));
    await arrive();
    const arrived = new Date();
    const results = await Promise.all(runs);
    return results.map((r) => ({ ...r, arrived: arrived.toISOString() }));
  }

  function check(results: Record<string, unknown>[], steady: string): void {
    const outcomes = results.map((r) => r[MOVER.id]);
    for (const r of results) {
      assert.equal(r[steady], true, `the minion that stays answers every job: ${JSON.stringify(r)}`);
      assert.ok(r[MOVER.id] === true || r[MOVER.id] === "Minion did not return. [Not connected]", `the moving minion answered or is reported not connected, never lost: ${JSON.stringify(r)}`);
    }
    assert.ok(outcomes.includes("Minion did not return. [Not connected]"), `a job published before it arrived is reported: ${JSON.stringify(outcomes)}`);
    assert.ok(outcomes.includes(true), `a job published after it arrived is answered: ${JSON.stringify(outcomes)}`);
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
