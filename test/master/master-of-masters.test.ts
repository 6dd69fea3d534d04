/**
 * brine as a master of masters (order_masters: True) with a stand-in syndic that speaks Salt's syndic
 * protocol (a test minion that takes every publish, reports the lower master's `salt/job/<jid>/new` in a
 * `syndic/<id>` event batch and answers in `_syndic_return` batches, as salt/minion.py's SyndicManager does):
 * `salt '*'` on the top prints the returns of the minions below, waits syndic_wait, reports the one that did
 * not answer "[No response]" (not "[Not connected]": it is not this master's minion), or "[Not connected]" when its
 * lower master says it is not connected there (`not_connected`, a brine lower master's); the returns are in the
 * job cache (jobs.lookup_jid, jobs.list_job); a resent batch stores and fires nothing twice; a job published
 * below comes up with its load; what a syndic may not do is skipped; without order_masters nothing is taken.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { jsonDocs, runCli, writeConfigDir } from "../helpers/cli.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { PublishLoad } from "../../src/lib/minion/functions.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import { LocalClient } from "../../src/lib/client/local-client.js";
import { formatJid } from "../../src/shared/protocol/jid.js";

const BELOW = ["b1", "b2", "b3"];
const ANSWERING = ["b1", "b2"];

function batch(syndic: string, load: PublishLoad, ids: string[], jobLoad: Record<string, unknown> = {}): Record<string, unknown> {
  const ret: Record<string, unknown> = {};
  for (const id of ids) ret[id] = { return: load.fun === "test.ping" ? true : `${id} ran ${String(load.fun)}`, retcode: 0, success: true, fun_args: load.arg };
  return { id: syndic, jid: load.jid, fun: load.fun, arg: load.arg, tgt: load.tgt, tgt_type: load.tgt_type, load: jobLoad, return: ret };
}

function syndicReturn(s: TestMinion, batches: Record<string, unknown>[]) {
  return s.channel.send({ cmd: "_syndic_return", id: s.id, tok: s.keys.tok, load: batches }, s.requestOptions);
}

/** What the stand-in's lower master says is not connected below it (a brine lower master's `not_connected`; a Python one says nothing). */
let notConnectedBelow: string[] | undefined;

/** Resolves once `tag` is among the bus events collected in `tags`; fails after `ms`. */
async function seenTag(tags: string[], tag: string, ms = 15_000): Promise<void> {
  for (const until = Date.now() + ms; !tags.includes(tag); ) {
    if (Date.now() > until) assert.fail(`no ${tag} on the bus within ${ms} ms (seen: ${tags.join(", ")})`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function forwardNew(s: TestMinion, jid: string, minions: string[]) {
  const data = { jid, minions, fun: "test.ping", ...(notConnectedBelow ? { not_connected: notConnectedBelow } : {}) };
  return s.channel.send(
    { cmd: "_minion_event", id: s.id, tok: s.keys.tok, pretag: `syndic/${s.id}`, events: [{ tag: `salt/job/${jid}/new`, data }, { tag: "salt/minion/b1/start", data: { id: "b1" } }, { tag: "salt/auth", data: { id: "b1", act: "accept" } }] },
    s.requestOptions,
  );
}

describe("brine as a master of masters with a syndic speaking Salt's protocol", { timeout: 180_000 }, () => {
  const logFile = path.join(mkdtempSync(path.join(os.tmpdir(), "brine-mom-log-")), "master");
  let m: TestMaster;
  let conf: string;
  let syn: TestMinion;
  const seen: PublishLoad[] = [];

  before(async () => {
    m = await startTestMaster({ auto_accept: true, order_masters: true, syndic_wait: 2, worker_threads: 2, master_id: "mom" }, undefined, { logFile });
    conf = writeConfigDir(m);
    const [k] = await testKeys(1);
    syn = fastMinion(m, "syn1", k!, {
      takeEveryPublish: true,
      onPublish: async (load) => {
        seen.push(load);
        if (load.fun === "saltutil.find_job") return;
        await forwardNew(syn, load.jid, BELOW);
        await syndicReturn(syn, [batch("syn1", load, ANSWERING)]);
      },
    });
    await syn.start();
    await syn.fireEvent("salt/syndic/syn1/start", "Syndic syn1 started"); // as Salt's syndic does once signed in
  });
  after(async () => {
    await syn?.stop();
    await m?.stop();
  });

  test("salt '*' prints the minions below the syndic, waits syndic_wait, and reports the silent one as not responding", async () => {
    const t0 = Date.now();
    const r = await runCli("salt", ["-c", conf, "*", "test.ping", "--out", "json", "-t", "3", "--gather-job-timeout", "1"]);
    const took = Date.now() - t0;
    assert.match(r.stdout, /"b1": true/, r.stdout + r.stderr);
    assert.match(r.stdout, /"b2": true/);
    assert.match(r.stdout, /"b3": "Minion did not return. \[No response\]/);
    assert.doesNotMatch(r.stdout, /syn1/, "the syndic itself is not a minion that answers");
    assert.equal(r.code, 1);
    assert.ok(took >= 2000, `waited syndic_wait (${took} ms)`);
    const pub = seen.find((l) => l.fun === "test.ping")!;
    const extra = pub as unknown as Record<string, unknown>;
    assert.deepEqual(extra.auth_list, [], "the syndic gets the user's auth list (root: none)");
    assert.equal(extra.to, 3, "and the CLI's timeout");
    assert.equal(extra.master_id, "mom");
    assert.ok(existsSync(path.join(m.cachedir, "syndics", "syn1")), "the syndic is registered");
  });

  test("a minion its lower master names not connected is reported [Not connected]; the others as before", async () => {
    notConnectedBelow = ["b3", "elsewhere"];
    try {
      const r = await runCli("salt", ["-c", conf, "*", "test.ping", "--out", "json", "-t", "3", "--gather-job-timeout", "1"]);
      const out = jsonDocs(r.stdout);
      assert.deepEqual(out, { b1: true, b2: true, b3: "Minion did not return. [Not connected]" }, r.stdout + r.stderr);
      assert.equal(r.code, 1);
    } finally {
      notConnectedBelow = undefined;
    }
  });

  test("the returns from below are in the job cache: jobs.lookup_jid and jobs.list_job", async () => {
    const pub = seen.find((l) => l.fun === "test.ping")!;
    const look = await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", pub.jid, "--out", "json"]);
    const rets = JSON.parse(look.stdout) as Record<string, unknown>;
    assert.deepEqual(Object.keys(rets).sort(), ANSWERING, look.stdout);
    const job = await runCli("salt-run", ["-c", conf, "jobs.list_job", pub.jid, "--out", "json"]);
    const j = JSON.parse(job.stdout) as { Minions: string[]; Result: Record<string, unknown> };
    assert.deepEqual([...j.Minions].sort(), [...BELOW, "syn1"], "the minions the syndic reported are expected (and the syndic's own key, which '*' matched)");
    assert.deepEqual(Object.keys(j.Result).sort(), ANSWERING);
  });

  test("a batch resent after a reconnect stores and fires nothing twice; a late minion's return is still taken", async () => {
    const pub = seen.find((l) => l.fun === "test.ping")!;
    const bus = new EventClient(m.sockDir);
    await bus.connect();
    const tags: string[] = [];
    const off = bus.on((e) => tags.push(e.tag));
    try {
      assert.equal(await syndicReturn(syn, [batch("syn1", pub, ANSWERING)]), null);
      assert.equal(await syndicReturn(syn, [batch("syn1", pub, ["b2", "b3"])]), null);
      // the bus keeps the order of what was fired: once b3's return is here, a refire of the resent batch would be too
      await seenTag(tags, `salt/job/${pub.jid}/ret/b3`);
    } finally {
      off();
      bus.close();
    }
    const rets = tags.filter((t) => t.startsWith(`salt/job/${pub.jid}/ret/`));
    assert.deepEqual(rets, [`salt/job/${pub.jid}/ret/b3`], "only the new return is fired");
    const look = await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", pub.jid, "--out", "json"]);
    assert.deepEqual(Object.keys(JSON.parse(look.stdout)).sort(), BELOW);
  });

  test("a job published on the lower master comes up with its load and is listed by jobs.*", async () => {
    const jid = formatJid(Date.now() - 60_000, 456);
    const load = { jid, fun: "cmd.run", arg: ["uptime"], tgt: "b*", tgt_type: "glob" } as unknown as PublishLoad;
    const jobLoad = { jid, fun: "cmd.run", arg: ["uptime"], tgt: "b*", tgt_type: "glob", user: "root", Minions: ["b1"] };
    assert.equal(await syndicReturn(syn, [batch("syn1", load, ["b1"], jobLoad)]), null);
    const job = await runCli("salt-run", ["-c", conf, "jobs.list_job", jid, "--out", "json"]);
    const j = JSON.parse(job.stdout) as { Function: string; Minions: string[]; Result: Record<string, { return: unknown }> };
    assert.equal(j.Function, "cmd.run");
    assert.deepEqual(j.Minions, ["b1"]);
    assert.equal(j.Result.b1!.return, "b1 ran cmd.run");
  });

  test("a syndic's forwarded events: the job's minions become syndic/<id>/salt/job/<jid>/new, the rest pass the tag filter as before", async () => {
    const bus = new EventClient(m.sockDir);
    await bus.connect();
    const tags: string[] = [];
    const off = bus.on((e) => tags.push(e.tag));
    const jid = formatJid(Date.now() - 60_000, 777);
    try {
      assert.equal(await forwardNew(syn, jid, ["b9"]), null);
      // the batch's events are fired together, in order: once its last one is here, so is every other one
      await seenTag(tags, "salt/minion/b1/start");
      await seenTag(tags, "syndic/syn1/salt/minion/b1/start");
    } finally {
      off();
      bus.close();
    }
    assert.ok(tags.includes(`syndic/syn1/salt/job/${jid}/new`), tags.join(", "));
    assert.ok(tags.includes("syndic/syn1/salt/minion/b1/start") && tags.includes("salt/minion/b1/start"));
    assert.ok(!tags.includes(`salt/job/${jid}/new`), "a job's new event is never fired from a syndic's batch");
    assert.ok(!tags.some((t) => t.endsWith("salt/auth")), "the lower master's salt/auth is not fired here");
    assert.doesNotMatch(readFileSync(logFile, "utf8"), /Filtering blacklisted event tag salt\/auth from syn1/, "nor warned about: the syndic sends it up routinely");
  });

  test("a syndic cannot return in another syndic's name, nor for a minion of this master", async () => {
    const pub = seen.find((l) => l.fun === "test.ping")!;
    assert.equal(await syndicReturn(syn, [{ ...batch("other", pub, ["x1"]) }, batch("syn1", pub, ["syn1"])]), null);
    const look = await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", pub.jid, "--out", "json"]);
    const ids = Object.keys(JSON.parse(look.stdout));
    assert.ok(!ids.includes("x1") && !ids.includes("syn1"), look.stdout);
  });
});

describe("a master without order_masters", { timeout: 60_000 }, () => {
  test("refuses _syndic_return and stores nothing", async () => {
    const m = await startTestMaster({ auto_accept: true });
    const [k] = await testKeys(1);
    const syn = fastMinion(m, "syn1", k!);
    try {
      await syn.start();
      const load = { jid: formatJid(Date.now() - 60_000, 321), fun: "test.ping", arg: [], tgt: "*", tgt_type: "glob" } as unknown as PublishLoad;
      assert.equal(await syndicReturn(syn, [batch("syn1", load, ["b1"])]), false);
      const conf = writeConfigDir(m);
      const look = await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", load.jid, "--out", "json"]);
      assert.deepEqual(JSON.parse(look.stdout), {});
      assert.ok(!existsSync(path.join(m.cachedir, "syndics", "syn1")));
    } finally {
      await syn.stop();
      await m.stop();
    }
  });
});

describe("a lower master taking a syndic's forwarded job", { timeout: 60_000 }, () => {
  test("the auth_list the master of masters sent limits the root-key publish; an empty one does not", async () => {
    const m = await startTestMaster({ auto_accept: true });
    const [k] = await testKeys(1);
    const mn = fastMinion(m, "low1", k!);
    try {
      await mn.start();
      const client = new LocalClient(m.cfg);
      const refused = await client.pub({ tgt: "*", fun: "cmd.run", arg: ["id"], kwargs: { auth_list: ["test.*"], master_id: "mom" } });
      assert.deepEqual(refused.error, { name: "AuthorizationError", message: "Authorization error occurred." });
      const allowed = await client.pub({ tgt: "*", fun: "test.ping", kwargs: { auth_list: ["test.*"], master_id: "mom" } });
      assert.deepEqual(allowed.minions, ["low1"]);
      const open = await client.pub({ tgt: "*", fun: "cmd.run", arg: ["id"], kwargs: { auth_list: [] } });
      assert.deepEqual(open.minions, ["low1"]);
    } finally {
      await mn.stop();
      await m.stop();
    }
  });
});
