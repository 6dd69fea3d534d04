/**
 * The ACL grammar (src/lib/auth/acl.ts) as a table, from the examples of Salt's eauth and publisher_acl
 * documentation (doc/topics/eauth/index.rst, doc/ref/publisheracl.rst), plus the cases where brine is
 * stricter than Salt on purpose (each says so).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { fillAuthList, matchingKeyValues, publishAllowed, specAllowed, prefixOnlyEntries, fullMatch } from "../../src/lib/auth/acl.js";

// Salt's documented external_auth example
const pam = {
  thatch: [{ "web*": ["test.*", "network.*"] }],
  "steve|admin.*": [".*"],
  "admins%": [{ "*": ["pkg.*"] }],
  fred: [{ "*": [{ "my_mod.*": { args: ["a.*", "b.*"], kwargs: { kwa: "kwa.*", kwb: "kwb" } } }] }],
  runme: ["@runner", "@wheel"],
  jobsman: ["@jobs", { "@wheel": ["key.list_.*"] }],
  limited: [{ "@runner": ["manage.up", { "jobs.lookup_jid": { kwargs: { jid: "2026.*" } } }] }],
  "*": ["test.ping"],
};

const MINIONS = ["web1", "web2", "db1"];
const minionsOf = (t: string) => MINIONS.filter((m) => (t === "*" ? true : t.endsWith("*") ? m.startsWith(t.slice(0, -1)) : m === t));

function canPublish(user: string, groups: string[], fun: string | string[], arg: unknown, minions: string[]): boolean {
  return publishAllowed({ authList: fillAuthList(pam, user, groups), fun, arg, minions, minionsOf, whitelist: ["saltutil.find_job"] });
}

const publishTable: [string, string, string[], string | string[], unknown, string[], boolean][] = [
  ["a user's functions on the minions of its target", "thatch", [], "test.ping", [], ["web1", "web2"], true],
  ["a module glob allows the module's functions", "thatch", [], "network.interfaces", [], ["web1"], true],
  ["a target that reaches outside the entry's minions is refused", "thatch", [], "test.ping", [], ["web1", "db1"], false],
  ["a function outside the list is refused", "thatch", [], "cmd.run", ["id"], ["web1"], false],
  ["a regex user key matches the user name whole", "admin-jane", [], "cmd.run", ["id"], ["db1"], true],
  ["the alternation of a regex user key", "steve", [], "state.apply", [], MINIONS, true],
  ["a group% entry applies to the group's members", "carol", ["admins"], "pkg.install", ["vim"], MINIONS, true],
  ["a group% entry does not apply to others", "carol", ["staff"], "pkg.install", ["vim"], MINIONS, false],
  ["args and kwargs regexes all match", "fred", [], "my_mod.go", ["alpha", "beta", { __kwarg__: true, kwa: "kwa1", kwb: "kwb" }], ["db1"], true],
  ["an argument that does not match is refused", "fred", [], "my_mod.go", ["zeta", "beta", { __kwarg__: true, kwa: "kwa1", kwb: "kwb" }], ["db1"], false],
  ["a missing kwarg is refused", "fred", [], "my_mod.go", ["alpha", "beta", { __kwarg__: true, kwa: "kwa1" }], ["db1"], false],
  ["brine: an argument must match whole (Salt's re.match would allow the suffix)", "fred", [], "my_mod.go", ["alpha", "beta", { __kwarg__: true, kwa: "kwa1", kwb: "kwb; rm -rf /" }], ["db1"], false],
  ["'*' gives a user that no key names its entries", "nobody", [], "test.ping", [], MINIONS, true],
  ["'*' does not add to a user a key names", "thatch", [], "test.ping", [], ["db1"], false],
  ["saltutil.find_job is always allowed (the CLI's job polling)", "thatch", [], "saltutil.find_job", ["1"], MINIONS, true],
  ["brine: every function of a compound job must be allowed (Salt allows it when any one is)", "thatch", [], ["test.ping", "cmd.run"], [[], ["id"]], ["web1"], false],
  ["a compound job whose functions are all allowed", "thatch", [], ["test.ping", "network.interfaces"], [[], []], ["web1"], true],
  ["brine: the user name is the subject, not the pattern (Salt matches the keys against a user named '.*')", ".*", [], "cmd.run", ["id"], MINIONS, false],
];

for (const [name, user, groups, fun, arg, minions, want] of publishTable) {
  test(`publish ACL: ${name}`, () => assert.equal(canPublish(user, groups, fun, arg, minions), want));
}

const specTable: [string, string, string, "runner" | "wheel", Record<string, unknown>, boolean | string][] = [
  ["@runner allows every runner", "runme", "jobs.list_jobs", "runner", {}, true],
  ["@wheel allows every wheel function", "runme", "key.delete", "wheel", {}, true],
  ["@jobs allows the jobs runner only", "jobsman", "jobs.lookup_jid", "runner", {}, true],
  ["@jobs does not allow another runner", "jobsman", "manage.up", "runner", {}, false],
  ["{'@wheel': [regex]} allows the matching wheel functions", "jobsman", "key.list_all", "wheel", {}, true],
  ["{'@wheel': [regex]} refuses others", "jobsman", "key.delete", "wheel", {}, false],
  ["{'@runner': [fun]} allows that runner", "limited", "manage.up", "runner", {}, true],
  ["{'@runner': [{fun: {kwargs}}]} checks the kwargs", "limited", "jobs.lookup_jid", "runner", { kwarg: { jid: "20260101000000000000" } }, true],
  ["{'@runner': [{fun: {kwargs}}]} refuses other kwargs", "limited", "jobs.lookup_jid", "runner", { kwarg: { jid: "1999" } }, false],
  ["a publish-only user cannot run runners", "thatch", "jobs.list_jobs", "runner", {}, false],
  ["a function without a module is Salt's SaltInvocationError", "runme", "nodot", "runner", {}, "SaltInvocationError"],
];

for (const [name, user, fun, form, args, want] of specTable) {
  test(`${form} ACL: ${name}`, () => {
    const v = specAllowed(fillAuthList(pam, user, []), fun, args, form);
    if (typeof want === "string") assert.equal(typeof v === "object" && v.error.name, want);
    else assert.equal(v, want);
  });
}

test("permissive_acl: '*' entries apply to named users too", () => {
  assert.deepEqual(fillAuthList({ a: ["x.y"], "*": ["test.ping"] }, "a", [], true), ["x.y", "test.ping"]);
  assert.deepEqual(fillAuthList({ a: ["x.y"], "*": ["test.ping"] }, "a", [], false), ["x.y"]);
});

test("publisher_acl: entries of every key that matches the local user (glob or regex)", () => {
  const acl = { fred: ["test.ping"], "dev_*": ["cmd.run"], "ops.*": [".*"] };
  assert.deepEqual(matchingKeyValues(acl, "fred"), ["test.ping"]);
  assert.deepEqual(matchingKeyValues(acl, "dev_jim"), ["cmd.run"]);
  assert.deepEqual(matchingKeyValues(acl, "ops1"), [".*"]);
  assert.deepEqual(matchingKeyValues(acl, "mallory"), []);
});

test("whole-name regexes keep Python's spellings and a leading flag group", () => {
  assert.equal(fullMatch("test\\..*", "test.ping"), true);
  assert.equal(fullMatch("(?i)TEST\\.PING", "test.ping"), true);
  assert.equal(fullMatch("cmd.run", "cmd.run_all"), false);
  assert.equal(fullMatch("a|ab", "ab"), true, "alternation is tried for the whole name");
  assert.equal(fullMatch("(unclosed", "x"), false, "an invalid regex matches nothing");
});

test("entries Salt would match as prefixes are found for the start-up warning", () => {
  assert.deepEqual(prefixOnlyEntries({ pam: { a: ["test", "test.*", "@runner", { "*": ["pkg"] }] } }).sort(), ["pkg", "test"]);
});
