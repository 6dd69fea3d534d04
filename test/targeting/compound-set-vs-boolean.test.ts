/**
 * Property: for every compound expression, the master's set evaluation (checkMinions) selects exactly
 * the minions whose own boolean evaluation (minionMatches) says yes. A generated fleet with cached data
 * for every minion is used, so greedy matching plays no part.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { checkMinions, minionMatches } from "../../src/lib/targeting/index.js";
import { contextOf, identityOf, pick, prng, type FakeMinion } from "./helpers.js";

const rand = prng(0x5a17);

function generateFleet(count: number): FakeMinion[] {
  const roles = ["web", "db", "cache", "lb"];
  const oses = ["Debian", "Ubuntu", "CentOS", "Rocky"];
  const dcs = ["par", "ams", "nyc"];
  const fleet: FakeMinion[] = [];
  for (let i = 0; i < count; i += 1) {
    const role = pick(rand, roles);
    const dc = pick(rand, dcs);
    const id = `${role}${i}.${dc}.example`;
    const net = pick(rand, ["10.0", "10.1", "192.168"]);
    fleet.push({
      id,
      data: {
        grains: {
          os: pick(rand, oses),
          osmajorrelease: pick(rand, [9, 11, 12, 22]),
          roles: roles.filter((r) => r === role || rand() < 0.2),
          hw: { cpus: pick(rand, [2, 4, 8]), vendor: pick(rand, ["Intel", "AMD"]) },
          virtual: rand() < 0.5,
          ipv4: [`${net}.${Math.floor(rand() * 4)}.${1 + Math.floor(rand() * 250)}`, "127.0.0.1"],
          ipv6: [`2001:db8:${Math.floor(rand() * 3)}::${(1 + Math.floor(rand() * 200)).toString(16)}`],
        },
        pillar: {
          env: pick(rand, ["prod", "staging", "dev"]),
          app: { name: pick(rand, ["shop", "blog", "api"]), tier: pick(rand, ["front", "back"]) },
          dc,
        },
      },
    });
  }
  return fleet;
}

const fleet = generateFleet(240);
const ctx = contextOf(fleet);
const someIds = fleet.slice(0, 6).map((m) => m.id);

/** Hand-written expressions: every engine but R@ (see below), operators, delimiters, and errors. */
const TABLE: string[] = [
  "web*",
  "*.par.example",
  "G@os:Debian",
  "G@os:debian and not web*",
  "G@roles:db or G@roles:cache",
  "G%@hw%vendor%Intel and G@hw:cpus:8",
  "G@virtual:true",
  "G@osmajorrelease:1*",
  "P@os:(debian|ubuntu)",
  "P@hw:vendor:amd and not P@os:rocky",
  "I@env:prod",
  "I@app:name:shop and I@app:tier:front",
  "I%@app%tier%back or I@dc:ams",
  "J@env:(prod|staging)",
  "J@app:name:b.*",
  `L@${someIds.join(",")}`,
  `L@${someIds[0]},nosuch.example or db*`,
  `not L@${someIds.slice(0, 3).join(",")}`,
  "E@web\\d+\\.par",
  "E@(db|cache)",
  "S@10.0.0.0/16",
  "S@192.168.0.0/16 and not G@os:CentOS",
  "S@2001:db8:1::/48",
  "S@127.0.0.1",
  "S@not-an-address or lb*",
  "not S@not-an-address and db*",
  "web* or db* and G@os:Ubuntu",
  "( web* or db* ) and G@os:Ubuntu",
  "not ( web* or db* )",
  "not web* not db*",
  "( G@os:Debian or G@os:Ubuntu ) not I@env:dev",
  "G@roles:web and ( I@env:prod or ( S@10.1.0.0/16 and not G@hw:vendor:Intel ) )",
  "*:Debian",
  "G@*:Intel",
  "G@hw:*",
  "I@app:*",
  "X@weird",
  "N@nosuchgroup",
  "not not web*",
  "web* db*",
  "( web*",
  "and web*",
  "",
];

/** A random expression tree over a pool of terms, rendered with operators Salt accepts. */
const TERM_POOL = [
  "web*",
  "db*",
  "*.ams.example",
  "G@os:Debian",
  "G@roles:cache",
  "G@hw:vendor:AMD",
  "P@os:(centos|rocky)",
  "I@env:prod",
  "J@app:name:(shop|api)",
  "I@app:tier:front",
  "E@lb\\d",
  "S@10.0.0.0/8",
  "S@192.168.2.0/24",
  `L@${someIds.slice(2, 5).join(",")}`,
];

function randomExpr(depth: number): string {
  if (depth === 0 || rand() < 0.3) return pick(rand, TERM_POOL);
  const r = rand();
  if (r < 0.2) return `not ${randomExpr(depth - 1)}`;
  if (r < 0.4) return `( ${randomExpr(depth - 1)} )`;
  if (r < 0.5) return `( ${randomExpr(depth - 1)} ) not ${pick(rand, TERM_POOL)}`; // implicit and
  return `${randomExpr(depth - 1)} ${rand() < 0.5 ? "and" : "or"} ${randomExpr(depth - 1)}`;
}

/** Random word soup: mostly invalid, exercises the error paths of both evaluators. */
function randomSoup(): string {
  const words = ["and", "or", "not", "(", ")", ...TERM_POOL];
  return Array.from({ length: 1 + Math.floor(rand() * 7) }, () => pick(rand, words)).join(" ");
}

function masterSelects(expr: string): string[] {
  return checkMinions(expr, "compound", ctx).minions;
}

function minionsSelect(expr: string): string[] {
  return fleet
    .filter((m) => minionMatches({ tgt: expr, tgt_type: "compound" }, identityOf(m)))
    .map((m) => m.id)
    .sort();
}

test("master sets and minion booleans agree on every expression in the table", () => {
  let nonTrivial = 0;
  for (const expr of TABLE) {
    const master = masterSelects(expr);
    assert.deepEqual(master, minionsSelect(expr), JSON.stringify(expr));
    if (master.length > 0 && master.length < fleet.length) nonTrivial += 1;
  }
  // guard against a vacuous pass where both sides select nothing (or everything)
  assert.ok(nonTrivial >= 30, `only ${nonTrivial} expressions select a proper subset`);
});

test("master sets and minion booleans agree on random expression trees", () => {
  for (let i = 0; i < 300; i += 1) {
    const expr = randomExpr(4);
    assert.deepEqual(masterSelects(expr), minionsSelect(expr), JSON.stringify(expr));
  }
});

test("master sets and minion booleans agree on random (mostly invalid) word soups", () => {
  for (let i = 0; i < 300; i += 1) {
    const expr = randomSoup();
    assert.deepEqual(masterSelects(expr), minionsSelect(expr), JSON.stringify(expr));
  }
});

test("the agreed answer is the right one, checked against the generated data directly", () => {
  const expected = fleet
    .filter((m) => {
      const g = m.data!.grains as { os: string; roles: string[] };
      const p = m.data!.pillar as { env: string };
      return (g.os === "Debian" || g.roles.includes("cache")) && !(p.env === "dev") && !m.id.startsWith("lb");
    })
    .map((m) => m.id)
    .sort();
  const expr = "( G@os:Debian or G@roles:cache ) and not I@env:dev not lb*";
  assert.deepEqual(masterSelects(expr), expected);
  assert.deepEqual(minionsSelect(expr), expected);
});

test("documented exception: R@ is every minion for the master but rejects the publish on a minion", () => {
  // Salt's master maps R@ to all minions in compound targets; a Salt minion without seco.range has no
  // range matcher and drops the whole expression. brine keeps both behaviours.
  assert.equal(masterSelects("R@%cluster").length, fleet.length);
  assert.deepEqual(minionsSelect("R@%cluster or web*"), []);
});
