/**
 * The event bus carries the tags of salt-protocol §9 for a job's life and a minion's start, and
 * `salt-run state.event` streams them; `salt-key` edits and reports keys in every state; the job cache
 * forgets jobs older than keep_jobs_seconds.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { PublishClient } from "../../tools/swarm/publish-client.js";
import { pemFinger } from "../../src/shared/protocol/pem.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys, waitForEvent } from "../helpers/minions.js";
import { CLI_DIR, runCli, writeConfigDir } from "../helpers/cli.js";

describe("events, runners and salt-key", { timeout: 180_000 }, () => {
  let tm: TestMaster;
  let conf: string;
  let ec: EventClient;
  const events: BusEvent[] = [];
  const minions: TestMinion[] = [];

  before(async () => {
    tm = await startTestMaster({ auto_accept: true });
    conf = writeConfigDir(tm);
    ec = new EventClient(tm.sockDir);
    await ec.connect();
    ec.on((e) => events.push(e));
    const k = await testKeys(3);
    minions.push(fastMinion(tm, "ev-1", k[0]!), fastMinion(tm, "ev-2", k[1]!, { protocol: "v2" }));
    await Promise.all(minions.map((m) => m.start()));
  });
  after(async () => {
    ec.close();
    for (const m of minions) await m.stop();
    await tm.stop();
  });

  test("a minion's start fires salt/auth, minion_start and salt/minion/<id>/start", async () => {
    for (const id of ["ev-1", "ev-2"]) {
      assert.ok(events.some((e) => e.tag === "salt/auth" && e.data.id === id && e.data.act === "accept"), id);
      assert.ok(events.some((e) => e.tag === "minion_start" && e.data.id === id), id);
      assert.ok(events.some((e) => e.tag === `salt/minion/${id}/start` && typeof e.data._stamp === "string"), id);
    }
  });

  test("a job fires <jid>, salt/job/<jid>/new, /publish and one /ret/<id> per minion, in that order", async () => {
    const pc = new PublishClient({ host: "127.0.0.1", port: tm.retPort, key: tm.rootKey });
    const done = Promise.all(minions.map((m) => waitForEvent(m, "return", (r) => r.fun === "test.echo")));
    const pub = await pc.publish({ tgt: "ev-*", fun: "test.echo", arg: ["x"] });
    pc.close();
    await done;
    await new Promise((r) => setTimeout(r, 200));
    const tags = events.map((e) => e.tag).filter((t) => t.includes(pub.jid));
    assert.deepEqual(tags.slice(0, 3), [pub.jid, `salt/job/${pub.jid}/new`, `salt/job/${pub.jid}/publish`]);
    assert.deepEqual(tags.slice(3).sort(), [`salt/job/${pub.jid}/ret/ev-1`, `salt/job/${pub.jid}/ret/ev-2`]);
    const nw = events.find((e) => e.tag === `salt/job/${pub.jid}/new`)!.data;
    assert.deepEqual(nw.minions, ["ev-1", "ev-2"]);
    assert.equal(nw.fun, "test.echo");
    const ret = events.find((e) => e.tag === `salt/job/${pub.jid}/ret/ev-1`)!.data;
    assert.equal(ret.return, "x");
    assert.equal(ret.tok, undefined, "tok is not forwarded on the bus");
  });

  test("salt-run state.event streams matching tags as 'tag<TAB>json'", async () => {
    const p = spawn(process.execPath, [new URL("salt-run.js", CLI_DIR).pathname, "-c", conf, "state.event", "salt/job/*/ret/*", "count=2"]);
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    const closed = new Promise((r) => p.on("close", r));
    // The runner subscribes when its thread starts, which takes a moment on a loaded machine: publish
    // until it has seen two returns and exits (bounded).
    const pc = new PublishClient({ host: "127.0.0.1", port: tm.retPort, key: tm.rootKey });
    let exited = false;
    void closed.then(() => (exited = true));
    for (let i = 0; i < 60 && !exited; i++) {
      await pc.publish({ tgt: "ev-1", fun: "test.ping" });
      await Promise.race([closed, new Promise((r) => setTimeout(r, 500))]);
    }
    pc.close();
    if (!exited) p.kill("SIGKILL");
    const code = await closed;
    assert.equal(code, 0, out);
    const lines = out.trim().split("\n").filter((l) => l.startsWith("salt/job/"));
    assert.equal(lines.length, 2, out);
    for (const l of lines) {
      const [tag, json] = l.split("\t");
      assert.match(tag!, /^salt\/job\/\d{20}\/ret\/ev-[12]$/);
      assert.equal(JSON.parse(json!).return, true);
    }
  });

  test("salt-key: fingerprints as pem_finger, reject/accept with --include-rejected, print, delete writes the drop file", async () => {
    const fp = await runCli("salt-key", ["-c", conf, "-F"]);
    const pub = readFileSync(path.join(tm.pkiDir, "minions", "ev-1"), "utf8");
    assert.ok(fp.stdout.includes(`ev-1:  ${pemFinger(pub)}`), fp.stdout);
    assert.match(fp.stdout, /Local Keys:\nmaster.pem: {2}[0-9a-f:]{95}\nmaster.pub: {2}[0-9a-f:]{95}/);
    const rej = await runCli("salt-key", ["-c", conf, "-r", "ev-2", "-y", "--include-all"]);
    assert.equal(rej.code, 0, rej.stdout + rej.stderr);
    assert.ok(existsSync(path.join(tm.pkiDir, "minions_rejected", "ev-2")));
    const listed = JSON.parse((await runCli("salt-key", ["-c", conf, "-L", "--out", "json"])).stdout);
    assert.deepEqual(listed, { minions: ["ev-1"], minions_denied: [], minions_pre: [], minions_rejected: ["ev-2"] });
    const acc = await runCli("salt-key", ["-c", conf, "-a", "ev-2", "-y", "--include-rejected"]);
    assert.equal(acc.code, 0);
    assert.ok(existsSync(path.join(tm.pkiDir, "minions", "ev-2")));
    const printed = await runCli("salt-key", ["-c", conf, "-p", "ev-1"]);
    assert.ok(printed.stdout.includes("-----BEGIN PUBLIC KEY-----"));
    const gotKeyEvent = new Promise<void>((resolve) => {
      const off = ec.on((e) => {
        if (e.tag === "key" && e.data.rotate_aes_key === true) {
          off();
          resolve();
        }
      });
    });
    const del = await runCli("salt-key", ["-c", conf, "-d", "ev-1", "-y"]);
    assert.equal(del.code, 0);
    assert.match(del.stdout, /Key for minion ev-1 deleted/);
    await gotKeyEvent; // the drop file made the master rotate its AES key
    assert.ok(!existsSync(path.join(tm.cachedir, ".dfn")), "the master consumed the drop file");
    assert.ok(events.some((e) => e.tag === "salt/key" && e.data.act === "delete" && e.data.id === "ev-1"));
  });
});
