/**
 * The orchestration compiler on its own (src/runners/orchestrate/compiler.ts and chunk-runner.ts, sans-I/O): high data in, the
 * state functions injected as a table, Salt's highstate return out. Each scenario is a behaviour of Salt's
 * State.call_high (salt/state.py, 3007) for master-side states: order, requisites and their `_in` forms,
 * failhard, test mode, parallel, and the failures it reports instead of running.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { compileHighData, genTag, orderChunks, padFuncs, type Data, type Low, type Running, type StateCall, type StateResult, type StateRuntime } from "../../src/runners/orchestrate/compiler.js";
import { callHigh, callSingle, checkResult } from "../../src/runners/orchestrate/chunk-runner.js";
import { stateRuntime, type OrchestrateIO } from "../../src/runners/orchestrate/states.js";

type Fn = (c: StateCall) => StateResult | Promise<StateResult>;

/** A runtime over a table of state functions; `calls` records each call's id in order. */
function table(fns: Record<string, Fn>, opts: { test?: boolean; failhard?: boolean; modWatch?: string[] } = {}): StateRuntime & { calls: string[] } {
  const calls: string[] = [];
  let t = 1_700_000_000_000;
  return {
    calls,
    test: opts.test ?? false,
    failhard: opts.failhard ?? false,
    now: () => (t += 1.5),
    lookup: (full) => (fns[full] ? { required: ["name"] } : { missing: `no ${full} here` }),
    hasModWatch: (s) => (opts.modWatch ?? []).includes(s),
    run: async (full, c) => {
      calls.push(`${c.low.__id__}${c.test ? "(test)" : ""}`);
      return fns[full]!(c);
    },
  };
}

const ok: Fn = (c) => ({ name: c.kwargs.name, changes: {}, result: true, comment: "ok" });
const changed: Fn = (c) => ({ name: c.kwargs.name, changes: { x: 1 }, result: c.test ? null : true, comment: "changed" });
const bad: Fn = (c) => ({ name: c.kwargs.name, changes: {}, result: false, comment: "bad" });

/** High data as sls.ts makes it: `__sls__`, `__env__`, `order` in file order. */
function high(states: Record<string, Record<string, unknown[]>>, sls = "orch"): Data {
  const h: Data = {};
  let order = 10000;
  for (const [id, body] of Object.entries(states)) {
    const b: Data = { __sls__: sls, __env__: "base" };
    for (const [st, run] of Object.entries(body)) b[st] = run.some((a) => typeof a === "object" && a !== null && "order" in a) ? run : [...run, { order: order++ }];
    h[id] = b;
  }
  return h;
}

function byRunNum(r: Running | string[]): string[] {
  assert.ok(!Array.isArray(r), `errors: ${JSON.stringify(r)}`);
  return Object.entries(r)
    .sort(([, a], [, b]) => (a.__run_num__ as number) - (b.__run_num__ as number))
    .map(([, v]) => v.__id__ as string);
}

test("states run in file order; a require runs the required state first; results carry Salt's keys", async () => {
  const rt = table({ "t.ok": ok });
  const r = await callHigh(high({ second: { t: ["ok", { require: [{ t: "third" }] }] }, first: { t: ["ok"] }, third: { t: ["ok"] } }), rt);
  // file order says second, first, third; second requires third, so third runs before it
  assert.deepEqual(rt.calls, ["third", "second", "first"]);
  assert.deepEqual(byRunNum(r), ["third", "second", "first"]);
  const one = (r as Running)["t_|-second_|-second_|-ok"]!;
  assert.deepEqual(Object.keys(one), ["name", "changes", "result", "comment", "__sls__", "__run_num__", "start_time", "duration", "__id__"]);
  assert.equal(one.__sls__, "orch");
  assert.match(String(one.start_time), /^\d\d:\d\d:\d\d(\.\d{6})?$/);
  assert.equal(typeof one.duration, "number");
});

test("a failed requisite stops the states that require it, naming sls.id; others still run", async () => {
  const rt = table({ "t.ok": ok, "t.bad": bad });
  const r = (await callHigh(high({ a: { t: ["bad"] }, b: { t: ["ok", { require: [{ t: "a" }] }] }, c: { t: ["ok"] } }), rt)) as Running;
  assert.deepEqual(rt.calls, ["a", "c"]);
  const b = r["t_|-b_|-b_|-ok"]!;
  assert.equal(b.result, false);
  assert.equal(b.comment, "One or more requisite failed: orch.a");
  assert.deepEqual(Object.keys(b), ["changes", "result", "duration", "start_time", "comment", "__run_num__", "__sls__", "__id__", "name"]);
  assert.equal(checkResult({ master: r }), false);
});

test("a requisite naming nothing is reported with Salt's layout, and nothing runs for that state", async () => {
  const rt = table({ "t.ok": ok });
  const r = (await callHigh(high({ a: { t: ["ok", { require: [{ salt: "nope" }] }] } }), rt)) as Running;
  assert.deepEqual(rt.calls, []);
  assert.equal(r["t_|-a_|-a_|-ok"]!.comment, "The following requisites were not found:\n                   require:\n                       salt: nope\n");
});

test("onchanges runs only after a change; onfail only after a failure; onfail_any and onchanges_any take any one", async () => {
  const rt = table({ "t.ok": ok, "t.changed": changed, "t.bad": bad });
  const r = (await callHigh(
    high({
      quiet: { t: ["ok"] },
      loud: { t: ["changed"] },
      broken: { t: ["bad"] },
      on_quiet: { t: ["ok", { onchanges: [{ t: "quiet" }] }] },
      on_loud: { t: ["ok", { onchanges: [{ t: "loud" }] }] },
      on_any: { t: ["ok", { onchanges_any: [{ t: "quiet" }, { t: "loud" }] }] },
      fix_ok: { t: ["ok", { onfail: [{ t: "quiet" }] }] },
      fix_broken: { t: ["ok", { onfail: [{ t: "broken" }] }] },
    }),
    rt,
  )) as Running;
  assert.equal(r["t_|-on_quiet_|-on_quiet_|-ok"]!.comment, "State was not run because none of the onchanges reqs changed");
  assert.equal(r["t_|-on_quiet_|-on_quiet_|-ok"]!.__state_ran__, false);
  assert.equal(r["t_|-on_loud_|-on_loud_|-ok"]!.comment, "ok");
  assert.equal(r["t_|-on_any_|-on_any_|-ok"]!.comment, "ok");
  assert.equal(r["t_|-fix_ok_|-fix_ok_|-ok"]!.comment, "State was not run because onfail req did not change");
  assert.equal(r["t_|-fix_broken_|-fix_broken_|-ok"]!.comment, "ok");
  assert.ok(!rt.calls.includes("on_quiet") && !rt.calls.includes("fix_ok"));
});

test("watch is a require on a state without mod_watch; with mod_watch an unchanged state fires mod_watch after a change", async () => {
  const rt = table({ "salt.x": ok, "t.ok": ok, "t.changed": changed, "t.mod_watch": (c) => ({ name: c.kwargs.name, changes: { fired: c.kwargs.sfun }, result: true, comment: "Watch statement fired." }) }, { modWatch: ["t"] });
  const r = (await callHigh(high({ src: { t: ["changed"] }, plain: { salt: ["x", { watch: [{ t: "src" }] }] }, watcher: { t: ["ok", { watch: [{ t: "src" }] }] } }), rt)) as Running;
  assert.equal(r["salt_|-plain_|-plain_|-x"]!.comment, "ok");
  const w = r["t_|-watcher_|-watcher_|-ok"]!;
  assert.equal(w.comment, "Watch statement fired.");
  assert.deepEqual(w.changes, { fired: "ok" });
  assert.deepEqual(rt.calls, ["src", "plain", "watcher", "watcher"]);
});

test("require_in and watch_in put the requisite on the named state", async () => {
  const rt = table({ "t.ok": ok, "t.bad": bad });
  const r = (await callHigh(high({ later: { t: ["ok"] }, first: { t: ["bad", { require_in: [{ t: "later" }] }] } }), rt)) as Running;
  assert.equal(r["t_|-later_|-later_|-ok"]!.comment, "One or more requisite failed: orch.first");
  assert.deepEqual(rt.calls, ["first"]);
});

test("failhard stops the run at the first failure; the states after it are absent; test mode never stops", async () => {
  const states = { a: { t: ["ok"] }, b: { t: ["bad", { failhard: true }] }, c: { t: ["ok"] } };
  const rt = table({ "t.ok": ok, "t.bad": bad });
  const r = (await callHigh(high(states), rt)) as Running;
  assert.deepEqual(Object.keys(r), ["t_|-a_|-a_|-ok", "t_|-b_|-b_|-bad"]);
  const global = table({ "t.ok": ok, "t.bad": bad }, { failhard: true });
  const g = (await callHigh(high({ a: { t: ["bad"] }, b: { t: ["ok"] } }), global)) as Running;
  assert.deepEqual(Object.keys(g), ["t_|-a_|-a_|-bad"]);
  const testMode = table({ "t.ok": ok, "t.bad": bad }, { test: true, failhard: true });
  const t = (await callHigh(high(states), testMode)) as Running;
  assert.equal(Object.keys(t).length, 3);
});

test("prereq: the prerequired state is tried in test mode first; the prereq state runs before it only when it would change", async () => {
  const rt = table({ "t.ok": ok, "t.changed": changed });
  const r = (await callHigh(high({ drain: { t: ["ok", { prereq: [{ t: "deploy" }] }] }, deploy: { t: ["changed"] }, idle: { t: ["ok", { prereq: [{ t: "noop" }] }] }, noop: { t: ["ok"] } }), rt)) as Running;
  assert.deepEqual(rt.calls.slice(0, 3), ["deploy(test)", "drain", "deploy"]);
  assert.equal(r["t_|-idle_|-idle_|-ok"]!.comment, "No changes detected");
  assert.ok(byRunNum(r).indexOf("drain") < byRunNum(r).indexOf("deploy"));
});

test("parallel states start together and are joined when a requisite or the end of the run needs them", async () => {
  let running = 0;
  let most = 0;
  const slow: Fn = async (c) => {
    running++;
    most = Math.max(most, running);
    await new Promise((r) => setTimeout(r, 30));
    running--;
    return { name: c.kwargs.name, changes: { done: true }, result: true, comment: "slow" };
  };
  const rt = table({ "t.slow": slow, "t.ok": ok });
  const r = (await callHigh(high({ p1: { t: ["slow", { parallel: true }] }, p2: { t: ["slow", { parallel: true }] }, after: { t: ["ok", { require: [{ t: "p1" }, { t: "p2" }] }] } }), rt)) as Running;
  assert.equal(most, 2);
  assert.equal(r["t_|-p1_|-p1_|-slow"]!.comment, "slow");
  assert.equal(r["t_|-p1_|-p1_|-slow"]!.__parallel__, true);
  assert.equal(r["t_|-after_|-after_|-ok"]!.comment, "ok");
});

test("a state module brine does not run, a missing argument and a thrown error are failed states saying so", async () => {
  const rt = stateRuntime({} as OrchestrateIO, { test: false, failhard: false });
  const r = (await callHigh(high({ shell: { cmd: ["run"] }, nosls: { salt: ["state", { tgt: "*" }] }, boom: { test: ["show_notification"] } }), rt)) as Running;
  assert.match(String(r["cmd_|-shell_|-shell_|-run"]!.comment), /^State 'cmd.run' was not found in SLS 'orch'\nReason: the 'cmd' state module does not run on brine's master/);
  assert.equal(r["salt_|-nosls_|-nosls_|-state"]!.comment, "No highstate or sls specified, no execution made");
  assert.match(String(r["test_|-boom_|-boom_|-show_notification"]!.comment), /^An exception occurred in this state: .*Missing required argument text\./s);
  const missing = (await callHigh(high({ x: { salt: ["state", { sls: "a" }] } }), rt)) as Running;
  assert.equal(missing["salt_|-x_|-x_|-state"]!.comment, "Missing parameter tgt for state salt.state\n");
});

test("malformed high data is answered with Salt's compile errors, and nothing runs", async () => {
  const rt = table({ "t.ok": ok });
  const errs = await callHigh({ a: { __sls__: "orch", __env__: "base", t: "ok" }, b: { __sls__: "orch", __env__: "base", t: ["ok", "bad"] } }, rt);
  assert.deepEqual(errs, ["State 'a' in SLS 'orch' is not formed as a list", "Too many functions declared in state 'b' in SLS 'orch'. Please choose one of the following: ok, bad"]);
  assert.deepEqual(rt.calls, []);
});

test("order: numbers, first and last, then state+name+fun; names expand in their order", () => {
  const chunks = orderChunks([
    { state: "b", fun: "f", name: "n", __id__: "1", order: "last" },
    { state: "a", fun: "f", name: "z", __id__: "2" },
    { state: "a", fun: "f", name: "y", __id__: "3", order: 5 },
    { state: "c", fun: "f", name: "x", __id__: "4", order: "first" },
    { state: "a", fun: "f", name: "a", __id__: "5" },
  ] as Low[]);
  assert.deepEqual(chunks.map((c) => c.__id__), ["4", "3", "5", "2", "1"]);
  const named = compileHighData({ many: { __sls__: "s", __env__: "base", t: ["ok", { names: ["one", "two"] }, { order: 3 }] } });
  assert.deepEqual(named.map((c) => [c.name, c.order]), [["one", 3.0001], ["two", 3.0002]]);
  assert.equal(genTag(named[0]!), "t_|-many_|-one_|-ok");
});

test("orchestrate_high's dotted keys are padded; a single call runs without requisites; check_result reads nested runs", async () => {
  const h: Data = { stage: { "t.ok": [{ x: 1 }] } };
  padFuncs(h);
  assert.deepEqual(h, { stage: { t: [{ x: 1 }, "ok"] } });
  const rt = table({ "t.ok": ok });
  const one = await callSingle({ state: "t", fun: "ok", name: "n", __id__: "n" }, rt);
  assert.equal((one as Running)["t_|-n_|-n_|-ok"]!.result, true);
  assert.deepEqual(await callSingle({ state: "t", fun: "nope", name: "n", __id__: "n" }, rt), ["Specified state 't.nope' was not found"]);
  assert.equal(checkResult({ m: { a: { result: true }, b: { result: null } } }), true);
  assert.equal(checkResult({ m: ["error"] }), false);
  assert.equal(checkResult({}), false);
});

/** A fake OrchestrateIO: minion answers by function, runner and wheel returns by name, `bus` the events a wait sees. */
function fakeIO(answers: Record<string, Record<string, Data>>, calls: string[] = [], bus: [string, Data][] = []): OrchestrateIO {
  return {
    waitForEvents: async (seen) => bus.some(([tag, data]) => seen(tag, data)),
    cmd: async (req) => {
      calls.push(`cmd ${req.fun} ${String(req.tgt)} ${JSON.stringify(req.kwarg)}`);
      return structuredClone(answers[req.fun] ?? {});
    },
    runner: async (name, arg, kwarg) => {
      calls.push(`runner ${name} ${JSON.stringify(kwarg)}`);
      return name === "bad.one" ? { fun: `runner.${name}`, jid: "2", return: "Exception occurred in runner bad.one", success: false } : { fun: `runner.${name}`, jid: "1", return: { args: arg, kwargs: kwarg }, success: true };
    },
    wheel: async (name) => {
      calls.push(`wheel ${name}`);
      return { fun: `wheel.${name}`, jid: "3", return: { minions: ["m1"] }, success: true };
    },
  };
}

const stateRet = (result: boolean | null, changes: Data = { x: 1 }) => ({ "test_|-a_|-a_|-nop": { result, changes, comment: "", name: "a", __run_num__: 0 } });

test("salt.state: success, changes, failing minions, allow_fail, missing minions, test mode; salt.function's retcodes", async () => {
  const calls: string[] = [];
  const io = fakeIO(
    {
      "state.sls": { m1: { ret: stateRet(true), out: "highstate", jid: "111", retcode: 0 }, m2: { ret: stateRet(true, {}), out: "highstate", jid: "111", retcode: 0 }, m3: { failed: true } },
      "test.ping": { m1: { ret: true, jid: "222", retcode: 0 }, m2: { ret: false, jid: "222", retcode: 0 }, m3: { ret: "x", jid: "222", retcode: 1 } },
    },
    calls,
  );
  const rt = stateRuntime(io, { test: false, failhard: false });
  const r = (await callHigh(high({ deploy: { salt: ["state", { tgt: "m*" }, { sls: ["web", "db"] }, { pillar: { v: 1 } }] }, tolerant: { salt: ["state", { tgt: "m*" }, { sls: "web" }, { allow_fail: 1 }] }, ping: { salt: ["function", { name: "test.ping" }, { tgt: "m*" }] } }), rt)) as Running;
  assert.equal(calls[0], 'cmd state.sls m* {"pillar":{"v":1},"queue":false,"concurrent":false}');
  await callHigh(high({ prod: { salt: ["state", { tgt: "m1" }, { sls: "web" }, { saltenv: "prod" }] } }), rt);
  assert.equal(calls.at(-1), 'cmd state.sls m1 {"saltenv":"prod","queue":false,"concurrent":false}', "saltenv, a compiler keyword, reaches salt.state");
  const d = r["salt_|-deploy_|-deploy_|-state"]!;
  assert.equal(d.result, false);
  assert.equal(d.comment, "Run failed on minions: m3");
  assert.equal(d.__jid__, "111");
  assert.deepEqual(Object.keys((d.changes as Data).ret as Data), ["m1", "m3"]);
  const t = r["salt_|-tolerant_|-tolerant_|-state"]!;
  assert.equal(t.result, true);
  assert.equal(t.comment, "States ran successfully. Updating m1, m3. No changes made to m2.");
  const p = r["salt_|-ping_|-test.ping_|-function"]!;
  assert.equal(p.result, false);
  assert.equal(p.comment, "Running function test.ping failed on minions: m2, m3 Function test.ping ran on m1, m2, m3.");

  const testRt = stateRuntime(fakeIO({ "state.sls": { m1: { ret: stateRet(null), jid: "9" } } }, calls), { test: true, failhard: false });
  const tr = (await callHigh(high({ deploy: { salt: ["state", { tgt: "m1" }, { sls: "web" }] }, ping: { salt: ["function", { name: "test.ping" }, { tgt: "m1" }] } }), testRt)) as Running;
  assert.equal(tr["salt_|-deploy_|-deploy_|-state"]!.result, null);
  assert.match(calls.at(-1)!, /"test":true/);
  assert.equal(tr["salt_|-ping_|-test.ping_|-function"]!.comment, "Function test.ping would be executed on target m1");
  const none = (await callHigh(high({ nobody: { salt: ["state", { tgt: "zz" }, { sls: "web" }] } }), stateRuntime(fakeIO({}), { test: false, failhard: false }))) as Running;
  assert.equal(none["salt_|-nobody_|-nobody_|-state"]!.comment, "No minions returned");
  const seenPub: unknown[] = [];
  const pubIO: OrchestrateIO = { ...fakeIO({}), cmd: async (req) => (seenPub.push([req.ret, req.pubKwargs, req.timeoutS, req.tgtType]), { m1: { ret: stateRet(true), jid: "5" } }) };
  await callHigh(high({ r: { salt: ["state", { tgt: "G@role:web" }, { tgt_type: "compound" }, { sls: "web" }, { ret: "mongo" }, { ret_config: "alt" }, { ret_kwargs: { db: "x" } }, { timeout: 90 }] } }), stateRuntime(pubIO, { test: false, failhard: false }));
  assert.deepEqual(seenPub, [["mongo", { ret_config: "alt", ret_kwargs: { db: "x" } }, 90, "compound"]]);
  const batchCalls: unknown[] = [];
  const batchIO: OrchestrateIO = { ...fakeIO({}), cmd: async (req) => (batchCalls.push([req.batch, req.failhard]), { m1: { out: "highstate", ret: stateRet(true) } }) };
  const batch = (await callHigh(high({ b: { salt: ["state", { tgt: "m*" }, { sls: "web" }, { batch: "10%" }, { failhard: true }] } }), stateRuntime(batchIO, { test: false, failhard: false }))) as Running;
  assert.equal(batch["salt_|-b_|-b_|-state"]!.comment, "States ran successfully. Updating m1.");
  assert.equal(batch["salt_|-b_|-b_|-state"]!.__jid__, undefined);
  assert.deepEqual(batchCalls, [["10%", true]]);
  const subset = (await callHigh(high({ s: { salt: ["state", { tgt: "m*" }, { sls: "web" }, { subset: 1 }] } }), rt)) as Running;
  assert.equal(subset["salt_|-s_|-s_|-state"]!.result, false);
  assert.match(String(subset["salt_|-s_|-s_|-state"]!.comment), /^Not supported by brine's orchestrate: subset/);
});

test("salt.runner, salt.wheel and salt.parallel_runners: arguments passed on, Salt's comments, failures, test mode", async () => {
  const calls: string[] = [];
  const rt = stateRuntime(fakeIO({}, calls), { test: false, failhard: false });
  const r = (await callHigh(
    high({
      arg: { salt: ["runner", { name: "test.arg" }, { foo: "bar" }, { kwarg: { k: 1 } }] },
      keys: { salt: ["wheel", { name: "key.list_all" }] },
      broken: { salt: ["runner", { name: "bad.one" }] },
      both: { salt: ["parallel_runners", { runners: { one: [{ name: "test.arg" }, { kwarg: { n: 1 } }], two: { name: "test.arg" } } }] },
    }),
    rt,
  )) as Running;
  const a = r["salt_|-arg_|-test.arg_|-runner"]!;
  assert.deepEqual(a, { ...a, name: "test.arg", changes: { return: { args: [], kwargs: { k: 1, foo: "bar" } } }, result: true, comment: "Runner function 'test.arg' executed.", __jid__: "1" });
  assert.deepEqual(r["salt_|-keys_|-key.list_all_|-wheel"]!.changes, { return: { minions: ["m1"] } });
  assert.equal(r["salt_|-keys_|-key.list_all_|-wheel"]!.comment, "Wheel function 'key.list_all' executed.");
  assert.equal(r["salt_|-broken_|-bad.one_|-runner"]!.result, false);
  assert.equal(r["salt_|-broken_|-bad.one_|-runner"]!.comment, "Runner function 'bad.one' failed.");
  const both = r["salt_|-both_|-both_|-parallel_runners"]!;
  assert.equal(both.result, true);
  assert.equal(both.comment, "All runner functions executed successfully.");
  assert.deepEqual(Object.keys((both.changes as Data).ret as Data), ["one", "two"]);
  const testRt = stateRuntime(fakeIO({}, calls), { test: true, failhard: false });
  const before = calls.length;
  const t = (await callHigh(high({ arg: { salt: ["runner", { name: "test.arg" }] }, keys: { salt: ["wheel", { name: "key.list_all" }] } }), testRt)) as Running;
  assert.equal(calls.length, before, "nothing is called in test mode");
  assert.equal(t["salt_|-arg_|-test.arg_|-runner"]!.comment, "Runner function 'test.arg' would be executed.");
  assert.equal(t["salt_|-keys_|-key.list_all_|-wheel"]!.result, null);
});

test("salt.wait_for_event: done when events matching the tag glob named every id (in data or data.data), else a timeout", async () => {
  const bus: [string, Data][] = [
    ["salt/minion/m1/start", { id: "m1" }],
    ["other/tag", { id: "m2" }],
    ["salt/minion/m2/start", { data: { id: "m2" } }],
  ];
  const rt = stateRuntime(fakeIO({}, [], bus), { test: false, failhard: false });
  const r = (await callHigh(high({ wait: { salt: ["wait_for_event", { name: "salt/minion/*/start" }, { id_list: ["m1", "m2"] }] }, late: { salt: ["wait_for_event", { name: "salt/minion/*/start" }, { id_list: ["m1", "m3"] }, { timeout: 0 }] } }), rt)) as Running;
  const w = r["salt_|-wait_|-salt/minion/*/start_|-wait_for_event"]!;
  assert.equal(w.result, true);
  assert.match(String(w.comment), /^All events seen in [\d.]+ seconds\.$/);
  assert.deepEqual(w.changes, { minions_seen: ["m1", "m2"] });
  const l = r["salt_|-late_|-salt/minion/*/start_|-wait_for_event"]!;
  assert.equal(l.result, false);
  assert.equal(l.comment, "Timeout value reached.");
  assert.deepEqual(l.changes, { minions_seen: ["m1"] });
  const t = (await callHigh(high({ wait: { salt: ["wait_for_event", { name: "x" }, { id_list: ["m1"] }] } }), stateRuntime(fakeIO({}), { test: true, failhard: false }))) as Running;
  assert.equal(t["salt_|-wait_|-x_|-wait_for_event"]!.comment, "Orchestration would wait for event 'x'");
});

test("retry: the state is called again after interval until its result is `until` or the attempts are spent; test mode only says so", async () => {
  let n = 0;
  const flaky: Fn = (c) => ({ name: c.kwargs.name, changes: {}, result: ++n >= 3, comment: `try ${n}` });
  const slept: number[] = [];
  const rt = { ...table({ "t.flaky": flaky, "t.bad": bad }), sleep: async (ms: number) => void slept.push(ms) };
  const r = (await callHigh(high({ up: { t: ["flaky", { retry: { attempts: 5, interval: 2 } }] }, never: { t: ["bad", { retry: { attempts: 2, interval: 1 } }] } }), rt)) as Running;
  const up = r["t_|-up_|-up_|-flaky"]!;
  assert.equal(up.result, true);
  assert.equal(up.comment, 'Attempt 1: Returned a result of "False", with the following comment: "try 1"\nAttempt 2: Returned a result of "False", with the following comment: "try 2"\ntry 3');
  assert.ok((up.duration as number) >= 4000);
  const never = r["t_|-never_|-never_|-bad"]!;
  assert.equal(never.result, false);
  assert.equal(never.comment, 'Attempt 1: Returned a result of "False", with the following comment: "bad"\nbad');
  assert.deepEqual(slept, [2000, 2000, 1000]);
  const t = (await callHigh(high({ up: { t: ["bad", { retry: true }] } }), table({ "t.bad": bad }, { test: true }))) as Running;
  assert.equal(t["t_|-up_|-up_|-bad"]!.comment, "bad  The state would be retried every 30 seconds (with a splay of up to 0 seconds) a maximum of 2 times or until a result of True is returned");
});
