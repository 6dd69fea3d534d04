/**
 * The `peer:` and `peer_run:` decisions (src/lib/auth/peer-acl.ts), row by row in Salt's order: the option,
 * the load's keys, the publish.* loop guard, the id regexes, compound jobs, pillar-glob targets, then the
 * function rights; and where brine is stricter (whole-name regexes).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { peerPublishDecision, peerRunDecision, peerRights, exactTargetType, prefixOnlyPeerKeys, type PeerPublishFacts } from "../../src/lib/auth/peer-acl.js";

const LOAD = { fun: "test.ping", arg: [], tgt: "web2", tgt_type: "glob", ret: "", id: "web1", tok: "t" };
const PEER = { "web.*": ["test.*"], "db1": ["cmd.run"], "ops": [{ "db*": ["disk.usage", { "cmd.run": { args: ["uptime"] } }] }] };
const base: PeerPublishFacts = { peer: PEER, load: LOAD, minions: ["web2"], exactMinions: ["web2"], minionsOf: (t) => (t === "db*" ? ["db1", "db2"] : []) };
const decide = (f: Partial<PeerPublishFacts> & { load?: Record<string, unknown> }) => peerPublishDecision({ ...base, ...f, load: { ...LOAD, ...(f.load ?? {}) } });
const refused = (f: Parameters<typeof decide>[0], why: RegExp) => {
  const v = decide(f);
  assert.equal(v.ok, false, JSON.stringify(v));
  assert.match((v as { reason: string }).reason, why);
};

test("1. no peer: option (or an empty one, or not a mapping) refuses every minion", () => {
  refused({ peer: {} }, /not enabled/);
  refused({ peer: undefined }, /not enabled/);
  refused({ peer: ["web.*"] }, /not enabled/);
});
test("2. a load without fun, arg, tgt, ret, id or tok is refused", () => {
  for (const k of ["fun", "arg", "tgt", "ret", "id", "tok"]) {
    const load: Record<string, unknown> = { ...LOAD };
    delete load[k];
    const v = peerPublishDecision({ ...base, load });
    assert.equal(v.ok, false, k);
    assert.match((v as { reason: string }).reason, new RegExp(k));
  }
});
test("3. publish.* is never published by a minion (no loops), whatever the rights", () => {
  refused({ peer: { ".*": [".*"] }, load: { fun: "publish.publish" } }, /no publish loops/);
  refused({ peer: { ".*": [".*"] }, load: { fun: "publish.runner" } }, /no publish loops/);
});
test("4. rights come from every key whose regex matches the whole id", () => {
  assert.deepEqual(decide({}), { ok: true, fun: "test.ping", arg: [] });
  assert.deepEqual(peerRights({ "web.*": ["a"], "web1": ["b"], "db.*": ["c"] }, "web1"), ["a", "b"]);
  // Salt's re.match is a prefix match: `db1` matched db10 and `web` matched web1; brine matches whole ids
  refused({ load: { id: "db10", fun: "cmd.run" } }, /no peer: entry matches minion id db10/);
  refused({ peer: { web: ["test.*"] } }, /no peer: entry/);
  // an invalid regex matches nothing
  refused({ peer: { "web(": ["test.*"] } }, /no peer: entry/);
});
test("5. the function must match a right whole (test.* allows test.ping, cmd.run does not allow cmd.run_all)", () => {
  refused({ load: { fun: "cmd.run" } }, /not in the peer: rights of web1/);
  assert.equal(decide({ load: { id: "db1", fun: "cmd.run" } }).ok, true);
  refused({ load: { id: "db1", fun: "cmd.run_all" } }, /not in the peer: rights/);
});
test("6. a {target: [...]} right: every targeted minion must be in its target, arguments as listed", () => {
  const ops = (fun: string, arg: unknown[], minions: string[]) => decide({ load: { id: "ops", fun, arg, tgt: minions.join(",") }, minions, exactMinions: minions });
  assert.equal(ops("disk.usage", [], ["db1", "db2"]).ok, true);
  assert.equal(ops("disk.usage", [], ["db1", "web2"]).ok, false);
  assert.equal(ops("cmd.run", ["uptime"], ["db1"]).ok, true);
  assert.equal(ops("cmd.run", ["rm -rf /"], ["db1"]).ok, false);
});
test("7. a compound job (`a,b`): each argument string is split on whitespace; every function must be allowed", () => {
  assert.deepEqual(decide({ load: { fun: "test.echo,test.ping", arg: ["hello world", ""] } }), { ok: true, fun: ["test.echo", "test.ping"], arg: [["hello", "world"], []] });
  refused({ load: { fun: "test.ping,cmd.run", arg: ["", "id"] } }, /test.ping,cmd.run on web2 is not in/);
  refused({ load: { fun: "test.ping,test.echo", arg: [[], "x"] } }, /must be strings/);
});
test("8. a pillar target that reaches more minions by globbing than matched exactly is refused (publish_validate)", () => {
  refused({ load: { tgt: "role:web*", tgt_type: "pillar" }, minions: ["web2", "web3"], exactMinions: ["web2"] }, /pillar globbing/);
  assert.equal(decide({ load: { tgt: "role:web", tgt_type: "pillar" }, minions: ["web2"], exactMinions: ["web2"] }).ok, true);
  assert.equal(exactTargetType("pillar"), "pillar_exact");
  assert.equal(exactTargetType("pillar_pcre"), "pillar_exact");
  assert.equal(exactTargetType("compound"), "compound_pillar_exact");
  assert.equal(exactTargetType("grain"), "grain");
});
test("9. fun, id and arg must have their types", () => {
  refused({ load: { fun: ["test.ping"] } }, /must be strings/);
  refused({ load: { arg: "x" } }, /arg must be a list/);
});

const RUN = { "web.*": ["manage\\.up", "jobs\\..*"] };
const runLoad = { fun: "manage.up", arg: [], id: "web1", tok: "t" };
test("10. peer_run: empty refuses; a load lacks fun, arg, id or tok; the runner must match a right whole", () => {
  assert.equal(peerRunDecision({}, runLoad).ok, false);
  assert.equal(peerRunDecision(undefined, runLoad).ok, false);
  for (const k of ["fun", "arg", "id", "tok"]) {
    const load: Record<string, unknown> = { ...runLoad };
    delete load[k];
    assert.equal(peerRunDecision(RUN, load).ok, false, k);
  }
  assert.deepEqual(peerRunDecision(RUN, runLoad), { ok: true, fun: "manage.up" });
  assert.deepEqual(peerRunDecision(RUN, { ...runLoad, fun: "jobs.list_jobs" }), { ok: true, fun: "jobs.list_jobs" });
  assert.equal(peerRunDecision(RUN, { ...runLoad, fun: "manage.upx" }).ok, false); // Salt's prefix match allowed it
  assert.equal(peerRunDecision(RUN, { ...runLoad, id: "db1" }).ok, false);
  // a non-string right is ignored
  assert.equal(peerRunDecision({ ".*": [{ "manage.up": {} }] }, runLoad).ok, false);
});

test("11. plain-id keys are named for the start-up warning (Salt matched them as prefixes); regexes are not", () => {
  assert.deepEqual(prefixOnlyPeerKeys({ web1: [], "web.*": [], "db-1.example.com": [], "^ops$": [] }), ["web1", "db-1.example.com"]);
  assert.deepEqual(prefixOnlyPeerKeys(undefined), []);
});

test("12. the master warns at start about peer keys and entries whose meaning is narrower than in Salt", async () => {
  const { prepareAuthorization } = await import("../../src/main-thread/eauth-startup.js");
  const { masterDefaults } = await import("../../src/shared/config/defaults.js");
  const warnings: string[] = [];
  const noop = () => {};
  const log = { critical: noop, error: noop, warning: (m: string) => warnings.push(m), info: noop, debug: noop, trace: noop };
  prepareAuthorization({ ...masterDefaults(), peer: { web1: ["test"], "db.*": ["test.*"] }, peer_run: { "ops.*": ["manage.up"] } }, log);
  assert.ok(warnings.some((w) => /^peer: keys "web1" match whole minion ids/.test(w)), warnings.join("\n"));
  assert.ok(warnings.some((w) => /^peer: entries "test" match whole function names/.test(w)), warnings.join("\n"));
  assert.ok(!warnings.some((w) => w.startsWith("peer_run:")), warnings.join("\n"));
});
