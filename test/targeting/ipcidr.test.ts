import { test } from "node:test";
import assert from "node:assert/strict";
import { checkMinions, ipcidrMatch, minionMatches, parseIpTarget } from "../../src/lib/targeting/index.js";
import { contextOf } from "./helpers.js";

const lan = { ipv4: ["10.0.0.5", "127.0.0.1"], ipv6: ["2001:db8::1", "::1"] };
const dmz = { ipv4: ["192.168.7.9"], ipv6: ["fe80::1"] };

test("an IPv4 address target matches a minion listing that address", () => {
  assert.equal(ipcidrMatch("10.0.0.5", lan), true);
  assert.equal(ipcidrMatch("10.0.0.6", lan), false);
});

test("an IPv4 network target matches any listed address inside it", () => {
  assert.equal(ipcidrMatch("10.0.0.0/24", lan), true);
  assert.equal(ipcidrMatch("10.0.1.0/24", lan), false);
  assert.equal(ipcidrMatch("0.0.0.0/0", dmz), true);
});

test("a network may be written with a netmask or a hostmask", () => {
  assert.equal(ipcidrMatch("10.0.0.0/255.255.255.0", lan), true);
  assert.equal(ipcidrMatch("10.0.0.0/0.0.0.255", lan), true);
  assert.equal(ipcidrMatch("10.0.0.5/255.255.255.255", lan), true); // a /32, not a /0 hostmask
  assert.equal(ipcidrMatch("10.0.0.5/255.255.255.255", dmz), false);
});

test("IPv6 targets look at the ipv6 grain and ignore spelling differences", () => {
  assert.equal(ipcidrMatch("2001:DB8:0:0:0:0:0:1", lan), true);
  assert.equal(ipcidrMatch("2001:db8::/32", lan), true);
  assert.equal(ipcidrMatch("2001:db9::/32", lan), false);
  assert.equal(ipcidrMatch("fe80::/10", dmz), true);
});

test("the target's family picks the grain: an IPv4 target never looks at ipv6 addresses", () => {
  assert.equal(ipcidrMatch("10.0.0.5", { ipv6: ["::ffff:10.0.0.5"] }), false);
  assert.equal(ipcidrMatch("10.0.0.0/8", { ipv4: [] }), false);
  assert.equal(ipcidrMatch("10.0.0.0/8", {}), false);
  assert.equal(ipcidrMatch("10.0.0.0/8", undefined), false);
});

test("invalid targets, as Python's ipaddress (strict) sees them, match nothing", () => {
  for (const bad of ["10.0.0.1/24", "010.0.0.1", "10.0.0.0/33", "10.0.0.0/", "1.2.3", "web1", ""]) {
    assert.equal(parseIpTarget(bad), null, bad);
    assert.equal(ipcidrMatch(bad, lan), false, bad);
  }
  assert.notEqual(parseIpTarget("10.0.0.0/24"), null);
  // documented divergence: Python accepts a zone index, then compares the text with grain values,
  // which never carry one; refusing it gives the same "no match"
  assert.equal(parseIpTarget("fe80::1%eth0"), null);
  assert.equal(parseIpTarget(["10.0.0.5"]), null);
});

test("grain values that are not addresses are skipped, a single string counts as one address", () => {
  assert.equal(ipcidrMatch("10.0.0.0/8", { ipv4: ["garbage", 7, "10.1.2.3"] }), true);
  assert.equal(ipcidrMatch("10.0.0.0/8", { ipv4: "10.1.2.3" }), true);
});

test("master ipcidr and S@ select minions by their cached ipv4/ipv6 grains", () => {
  const ctx = contextOf([
    { id: "lan1", data: { grains: lan } },
    { id: "dmz1", data: { grains: dmz } },
  ]);
  assert.deepEqual(checkMinions("10.0.0.0/8", "ipcidr", ctx), { minions: ["lan1"], missing: [] });
  assert.deepEqual(checkMinions("S@192.168.0.0/16 or S@2001:db8::1", "compound", ctx).minions, ["dmz1", "lan1"]);
  assert.deepEqual(checkMinions("not S@10.0.0.0/8", "compound", ctx).minions, ["dmz1"]);
  assert.deepEqual(checkMinions("10.0.0.1/8", "ipcidr", ctx).minions, []);
});

test("a minion's ipcidr matcher checks its own grains", () => {
  const self = { id: "lan1", grains: lan, pillar: {} };
  assert.equal(minionMatches({ tgt: "10.0.0.0/24", tgt_type: "ipcidr" }, self), true);
  assert.equal(minionMatches({ tgt: "192.168.0.0/16", tgt_type: "ipcidr" }, self), false);
  assert.equal(minionMatches({ tgt: "not-an-ip", tgt_type: "ipcidr" }, self), false);
  assert.equal(minionMatches({ tgt: "not S@not-an-ip", tgt_type: "compound" }, self), true);
});
