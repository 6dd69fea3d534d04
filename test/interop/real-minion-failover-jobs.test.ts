/**
 * A real 3007 salt-minion with `master_type: failover` between two brine masters sharing the key (its key
 * accepted on both): when the first dies, every job published on the second while the minion moves there is
 * answered or reported "[Not connected]" by brine's `salt` CLI, never "[No response]" or missing. The jobs
 * published before it arrives (seen on the bus) are "[Not connected]"; those published once it signed in are
 * answered. A test minion stays on the second master from its own address (on one host, a loopback connection
 * stands for every local address, as in Salt). Skips with a message when Salt's source is absent.
 */
import { test, describe, after } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { freePort, startTestMaster, type TestMaster } from "../helpers/master.js";
import { HARNESS, realSaltSkipReason, stopAtThisProcessEnd, stopRealMinions } from "../helpers/real-salt.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { jsonDocs, runCli, writeConfigDir } from "../helpers/cli.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";

const skip = realSaltSkipReason(["3007.x"]);
const MID = "fj7";
const NOT_CONNECTED = "Minion did not return. [Not connected]";

async function until(what: string, pred: () => boolean, ms: number): Promise<void> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (pred()) return;
  throw new Error(`timed out waiting for ${what}`);
}

describe("jobs published while a real failover minion moves to the second brine master", { skip, timeout: 600_000 }, () => {
  let a: TestMaster | undefined;
  let b: TestMaster | undefined;
  let steady: TestMinion | undefined;
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-fj-"));
  after(async () => {
    stopRealMinions(runDir);
    await steady?.stop().catch(() => undefined);
    await a?.stop().catch(() => undefined);
    await b?.stop().catch(() => undefined);
  });

  test("are answered or reported [Not connected]", async () => {
    const ret = await freePort();
    const pub = await freePort();
    const common = { auto_accept: true, worker_threads: 2, ret_port: ret, publish_port: pub };
    a = await startTestMaster({ ...common, id: "fj_a", interface: "127.0.0.2" });
    const rootB = mkdtempSync(path.join(os.tmpdir(), "brine-fj-b-"));
    const pkiB = path.join(rootB, "pki", "master");
    mkdirSync(path.join(pkiB, "minions"), { recursive: true });
    for (const f of ["master.pem", "master.pub"]) copyFileSync(path.join(a.pkiDir, f), path.join(pkiB, f));

    const dropIn = path.join(runDir, "minions", MID, "conf", "minion.d");
    mkdirSync(dropIn, { recursive: true });
    writeFileSync(path.join(dropIn, "failover.conf"), "master_type: failover\nmaster_alive_interval: 10\nretry_dns: 0\nauth_tries: 1\nauth_timeout: 3\n");
    await new Promise<void>((resolve, reject) => {
      stopAtThisProcessEnd(runDir);
      const p = spawn(path.join(HARNESS, "start-minion.sh"), ["--dir", runDir, MID, "[127.0.0.2, 127.0.0.3]", String(ret), String(pub)], { env: { ...process.env, SALT_REF: "3007.x", SALT_WAIT: "90" } });
      let out = "";
      p.stdout.on("data", (d) => (out += d));
      p.stderr.on("data", (d) => (out += d));
      p.on("close", (code) => (code === 0 ? resolve() : reject(new Error(out))));
    });
    // the minion's key, accepted on the first, is accepted on the second too (the multi-master tutorial)
    copyFileSync(path.join(a.pkiDir, "minions", MID), path.join(pkiB, "minions", MID));
    b = await startTestMaster({ ...common, id: "fj_b", interface: "127.0.0.3" }, rootB);
    const [k] = await testKeys(1);
    steady = fastMinion(b, "fj-steady", k!, { master: "127.0.0.3", sourceIp: "127.0.0.85", grains: { id: "fj-steady", ipv4: ["127.0.0.85"] } });
    await steady.start();

    const conf = writeConfigDir(b);
    const bus = new EventClient(b.sockDir);
    await bus.connect();
    let published = 0;
    let arrived = false;
    bus.on((e) => {
      if (/^salt\/job\/\d+\/new$/.test(e.tag)) published++;
      const id = (e.data as { id?: unknown } | null)?.id;
      if (e.tag === `salt/minion/${MID}/start` || (e.tag === "minion_start" && id === MID)) arrived = true;
    });
    const job = async (when: string): Promise<Record<string, unknown>> => {
      const r = await runCli("salt", ["-c", conf, "-L", `${MID},fj-steady`, "test.ping", "--out", "json", "-t", "5", "--gather-job-timeout", "2"]);
      return { when, ...jsonDocs(r.stdout) };
    };
    try {
      await a.stop();
      a = undefined;
      // published at once: the minion notices only after master_alive_interval (10 s), then signs in to the second
      const runs = [job("before"), job("before")];
      await until("the first jobs were published", () => published >= 2, 60_000);
      assert.equal(arrived, false, "they were published before the minion arrived");
      await until("the minion signed in to the second master", () => arrived, 120_000);
      await new Promise((r) => setTimeout(r, 2000)); // its start-up after the sign-in (pillar, publish connection)
      runs.push(job("after"), job("after"));
      const results = await Promise.all(runs);
      const seen = results.map((r) => `${r.when}: ${String(r[MID])}`).join("; ");
      for (const r of results) assert.equal(r["fj-steady"], true, seen);
      for (const r of results.filter((x) => x.when === "before")) assert.equal(r[MID], NOT_CONNECTED, seen);
      for (const r of results.filter((x) => x.when === "after")) assert.equal(r[MID], true, seen);
    } finally {
      bus.close();
    }
  });
});
