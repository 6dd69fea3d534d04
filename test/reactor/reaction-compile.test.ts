/**
 * Reaction SLS compiled as Salt's Reactor compiles it (salt/utils/reactor.py): `<id>: {<state>.<fun>: [...]}`,
 * the `cmd` alias, order, the new `args` form (keyword arguments) against legacy `arg`/`kwarg`, runner and wheel
 * keyword arguments from the other keys, verify_high errors that make the event react with nothing, caller
 * refused as unsupported, and the reactor map's add/delete answers (Salt's texts).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { compileReactions, reactionCall, ReactorMap, unsupportedIn } from "../../src/automation/reactor.js";

const high = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).map(([id, body]) => [id, { sls: "/srv/reactor/x.sls", body }]));

test("reactions compile in order with Salt's argument forms", () => {
  const { reactions, errors } = compileReactions(
    high({
      b_local: { "local.cmd.run": [{ tgt: "web*" }, { tgt_type: "glob" }, { args: [{ cmd: "uptime" }] }] },
      a_legacy: { "cmd.test.echo": [{ tgt: ["m1", "m2"] }, { tgt_type: "list" }, { arg: ["hi"] }, { kwarg: { x: 1 } }] },
      c_runner: { "runner.jobs.list_jobs": [{ search_function: "test.*" }, { order: 1 }] },
      d_wheel: { "wheel.key.accept": [{ args: { match: "m1" } }] },
    }),
  );
  assert.deepEqual(errors, []);
  assert.deepEqual(reactions.map((r) => r.id), ["c_runner", "a_legacy", "b_local", "d_wheel"]);
  const calls = Object.fromEntries(reactions.map((r) => [r.id, reactionCall(r)]));
  assert.deepEqual(calls.b_local, { kind: "local", tgt: "web*", tgtType: "glob", fun: "cmd.run", arg: [{ cmd: "uptime", __kwarg__: true }], ret: "" });
  assert.deepEqual(calls.a_legacy, { kind: "local", tgt: ["m1", "m2"], tgtType: "list", fun: "test.echo", arg: ["hi", { x: 1, __kwarg__: true }], ret: "" });
  assert.deepEqual(calls.c_runner, { kind: "runner", fun: "jobs.list_jobs", arg: [], kwarg: { search_function: "test.*" } });
  assert.deepEqual(calls.d_wheel, { kind: "wheel", fun: "key.accept", arg: [], kwarg: { match: "m1" } });
});

test("a malformed reaction file reacts with nothing; caller reactions are refused as unsupported", () => {
  assert.ok(compileReactions(high({ x: "not a map" })).errors.length === 1);
  assert.ok(compileReactions(high({ x: { "local.test.ping": { tgt: "*" } } })).errors[0]!.includes("not formatted as a list"));
  assert.ok(compileReactions(high({ x: { "state.apply": [{ tgt: "*" }] } })).errors[0]!.includes("is not a reaction"));
  const { reactions } = compileReactions(high({ c: { "caller.file.touch": [{ args: [{ name: "/tmp/x" }] }] } }));
  const call = reactionCall(reactions[0]!);
  assert.equal(call.kind, "unsupported");
  assert.match((call as { why: string }).why, /reaction 'c'/);
  assert.equal(reactionCall(compileReactions(high({ n: { "local.test.ping": [{ arg: [] }] } })).reactions[0]!).kind, "unsupported", "a local reaction without tgt");
  assert.deepEqual(unsupportedIn("a:\n  caller.file.touch:\n    - args: []\nb:\n  local.test.ping: []\n"), ["caller.file.touch"]);
});

test("the reactor map matches tags by glob and answers add/delete with Salt's texts", () => {
  const m = new ReactorMap([{ "salt/minion/*/start": ["/srv/reactor/start.sls"] }, { "my/*": ["/a.sls", "/b.sls"] }]);
  assert.deepEqual(m.filesFor("salt/minion/web1/start"), ["/srv/reactor/start.sls"]);
  assert.deepEqual(m.filesFor("my/thing"), ["/a.sls", "/b.sls"]);
  assert.deepEqual(m.filesFor("salt/job/1/ret/x"), []);
  assert.deepEqual(m.add("my/*", ["/c.sls"]), { status: false, comment: "Reactor already exists." });
  assert.deepEqual(m.add("other/*", ["/c.sls"]), { status: true, comment: "Reactor added." });
  assert.deepEqual(m.filesFor("other/x"), ["/c.sls"]);
  assert.deepEqual(m.delete("other/*"), { status: true, comment: "Reactor deleted." });
  assert.deepEqual(m.delete("other/*"), { status: false, comment: "Reactor does not exists." });
  assert.deepEqual(m.filesFor("other/x"), []);
});
