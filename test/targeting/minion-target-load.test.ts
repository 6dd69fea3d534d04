import { test } from "node:test";
import assert from "node:assert/strict";
import { checkMinions, minionMatches, type PublishTarget } from "../../src/lib/targeting/index.js";
import { contextOf } from "./helpers.js";

const self = {
  id: "web1",
  grains: { os: "Debian", ipv4: ["10.0.0.1"] },
  pillar: { env: "prod" },
};

test("a load without tgt is never for this minion", () => {
  assert.equal(minionMatches({ tgt_type: "glob" }, self), false);
  assert.equal(minionMatches(null as unknown as PublishTarget, self), false);
});

test("a missing tgt_type means glob; an unknown or non-string tgt_type means not for me", () => {
  assert.equal(minionMatches({ tgt: "web*" }, self), true);
  assert.equal(minionMatches({ tgt: "web*", tgt_type: "range" }, self), false);
  assert.equal(minionMatches({ tgt: "web*", tgt_type: "data" }, self), false);
  assert.equal(minionMatches({ tgt: "web*", tgt_type: null }, self), false);
  assert.equal(minionMatches({ tgt: "web*", tgt_type: "GLOB" }, self), false);
});

test("every supported tgt_type dispatches to its matcher", () => {
  const cases: Array<[PublishTarget, boolean]> = [
    [{ tgt: "web?", tgt_type: "glob" }, true],
    [{ tgt: "w.b", tgt_type: "pcre" }, true],
    [{ tgt: "db1,web1", tgt_type: "list" }, true],
    [{ tgt: "os:Debian", tgt_type: "grain" }, true],
    [{ tgt: "os:deb", tgt_type: "grain_pcre" }, true],
    [{ tgt: "env:prod", tgt_type: "pillar" }, true],
    [{ tgt: "env:pr", tgt_type: "pillar_pcre" }, true],
    [{ tgt: "env:prod", tgt_type: "pillar_exact" }, true],
    [{ tgt: "10.0.0.0/8", tgt_type: "ipcidr" }, true],
    [{ tgt: "G@os:Debian and I@env:prod", tgt_type: "compound" }, true],
    [{ tgt: "os:CentOS", tgt_type: "grain" }, false],
    [{ tgt: "env:pro", tgt_type: "pillar_exact" }, false],
  ];
  for (const [load, expected] of cases) assert.equal(minionMatches(load, self), expected, JSON.stringify(load));
});

test("a null delimiter in the load is not the default: the grain matcher fails", () => {
  assert.equal(minionMatches({ tgt: "os:Debian", tgt_type: "grain", delimiter: null }, self), false);
  assert.equal(minionMatches({ tgt: "os:Debian", tgt_type: "grain", delimiter: undefined }, self), true);
});

test("unknown target types select no minions on the master", () => {
  const ctx = contextOf([{ id: "web1" }]);
  assert.deepEqual(checkMinions("web*", "range", ctx), { minions: [], missing: [] });
  assert.deepEqual(checkMinions("web*", "bogus", ctx), { minions: [], missing: [] });
  assert.deepEqual(checkMinions("web*", undefined, ctx).minions, ["web1"]); // default is glob
});
