/**
 * The reactor end to end: a minion fires an event (`_minion_event`, as `event.send` does), the reactor renders
 * its SLS with `tag` and `data` and publishes `cmd.run` to that minion, whose return arrives on the bus and in
 * the job cache. Also: a runner reaction runs as user Reactor, a reaction file that fails to render is logged
 * while the next event still reacts, and reactor.add/delete change the running map.
 *
 * Compared with the Python master (3007.x, ../shared/real-salt, same reactor map and SLS): the event a minion's
 * `event.send my/custom/thing foo=bar` puts on the bus is `{cmd: _minion_event, data: {...foo, __pub_*}, id, pretag,
 * tag, ts}`, so `data['id']` and `data['data']['foo']` are what an SLS reads (brine: the same map); the `local`
 * reaction's job is listed with User root and Arguments `[{__kwarg__: True, text: ...}]` for `args: [{text: ...}]`;
 * a `runner.test.arg` reaction with `args: [{x: 1}]` fires `salt/run/<jid>/new|ret` with `user: Reactor`,
 * `fun_args: [{x: 1}]`, return `{args: [], kwargs: {x: 1}}`, and is listed by jobs.list_jobs (Target the master's
 * id, Target-type list, User Reactor).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { EventClient } from "../../src/lib/client/event-client.js";
import { controlCall } from "../../src/lib/client/control-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import { startTestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";

async function until<T>(f: () => T | undefined, ms: number, what: string): Promise<T> {
  for (let t = 0; t < ms; t += 50) {
    const v = f();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`not seen in ${ms} ms: ${what}`);
}

test("a reactor answers a minion's event by running cmd.run on it; runner reactions run as Reactor; render errors are logged, not fatal", { timeout: 90_000 }, async () => {
  const root = (await import("node:fs")).mkdtempSync(path.join((await import("node:os")).tmpdir(), "brine-react-"));
  const rdir = path.join(root, "reactor");
  mkdirSync(rdir, { recursive: true });
  writeFileSync(
    path.join(rdir, "answer.sls"),
    `answer_{{ data['id'] }}:
  local.cmd.run:
    - tgt: {{ data['id'] }}
    - args:
      - cmd: "echo {{ data['data']['word'] }} from {{ tag }}"
`,
  );
  writeFileSync(path.join(rdir, "runner.sls"), `run_it:\n  runner.test.arg:\n    - args:\n      - seen: {{ tag }}\n`);
  writeFileSync(path.join(rdir, "broken.sls"), `{{ data['nope']['deeper'] }}\n`);
  const logFile = path.join(root, "master.log");
  const tm = await startTestMaster(
    {
      auto_accept: true,
      reactor: [{ "my/custom/*": [path.join(rdir, "answer.sls")] }, { "my/runner": path.join(rdir, "runner.sls") }, { "my/broken": [path.join(rdir, "broken.sls")] }],
    } as never,
    root,
    { logFile },
  );
  const ec = new EventClient(tm.sockDir);
  await ec.connect();
  const events: BusEvent[] = [];
  ec.on((e) => events.push(e));
  const [k] = await testKeys(1);
  const m = fastMinion(tm, "react-1", k!, { cmdRun: (cmd: string) => ({ stdout: `ran: ${cmd}` }) } as never);
  try {
    await m.start();
    // a render error: logged, and the reactor goes on
    await m.fireEvent("my/broken", { x: 1 });
    await until(() => (readFileSync(logFile, "utf8").includes("Failed to render") ? true : undefined), 10_000, "the render error in the log");

    await m.fireEvent("my/custom/thing", { word: "hello" });
    const pub = await until(() => events.find((e) => /^salt\/job\/\d{20}\/new$/.test(e.tag) && e.data.fun === "cmd.run"), 15_000, "the reaction's publish");
    assert.deepEqual(pub.data.minions, ["react-1"]);
    assert.deepEqual(pub.data.arg, [{ cmd: "echo hello from my/custom/thing", __kwarg__: true }]);
    const jid = pub.tag.split("/")[2];
    const ret = await until(() => events.find((e) => e.tag === `salt/job/${jid}/ret/react-1`), 15_000, "the minion's return");
    assert.equal(ret.data.return, "ran: echo hello from my/custom/thing");

    // a runner reaction: started through the master as user Reactor, recorded as a job
    await m.fireEvent("my/runner", {});
    const runRet = await until(() => events.find((e) => /^salt\/run\/\d{20}\/ret$/.test(e.tag) && e.data.fun === "runner.test.arg"), 15_000, "the runner reaction's return");
    assert.equal(runRet.data.user, "Reactor");
    assert.deepEqual(runRet.data.return, { args: [], kwargs: { seen: "my/runner" } });

    const stats = await controlCall(tm.sockDir, { op: "automation", req: { op: "reactor.stats" } });
    assert.equal(stats.type, "return");
    assert.equal((stats.ret as { dropped: number }).dropped, 0);
    const listed = await controlCall(tm.sockDir, { op: "run", fun: "reactor.list", arg: [], kwarg: {} });
    assert.deepEqual(listed.ret, [{ "my/custom/*": [path.join(rdir, "answer.sls")] }, { "my/runner": [path.join(rdir, "runner.sls")] }, { "my/broken": [path.join(rdir, "broken.sls")] }]);

    // reactor.add: a new glob reacts at once (the main thread's filter learns it); reactor.delete removes it
    const added = await controlCall(tm.sockDir, { op: "run", fun: "reactor.add", arg: ["late/*"], kwarg: { reactors: path.join(rdir, "answer.sls") } });
    assert.deepEqual(added.ret, { status: true, comment: "Reactor added." });
    await m.fireEvent("late/one", { word: "late" });
    await until(() => events.find((e) => /^salt\/job\/\d{20}\/new$/.test(e.tag) && e.data.arg?.[0]?.cmd === "echo late from late/one"), 15_000, "the added reactor's publish");
    const deleted = await controlCall(tm.sockDir, { op: "run", fun: "reactor.delete", arg: ["late/*"], kwarg: {} });
    assert.deepEqual(deleted.ret, { status: true, comment: "Reactor deleted." });
  } finally {
    ec.close();
    await m.stop();
    await tm.stop();
  }
});
