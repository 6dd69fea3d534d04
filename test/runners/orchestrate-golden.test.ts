/**
 * brine's orchestrate against the Python master's answers to the same files (test/fixtures/orchestrate: the SLS
 * tree and `salt-run ... --out json` captured from Salt 3007.x with two real minions, db-1 and web-1). Here the
 * minions are brine's test minions with the same ids; their stand-in `state.sls` answers what those real minions
 * answered for these SLS files. Compared as JSON text (so key order counts too), leaving out what differs by run:
 * `start_time`, `duration`, jids (checked to be jids) and the master's id.
 */
import { describe, before, after, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { controlCall } from "../../src/lib/client/control-client.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { repoRoot } from "../helpers/paths.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

const FIXTURES = path.join(repoRoot, "test", "fixtures", "orchestrate");

/** Volatile fields out, jids checked and masked, the master's id replaced. */
function normalize(v: unknown, depth = 0): unknown {
  if (Array.isArray(v)) return v.map((x) => normalize(x, depth + 1));
  if (v === null || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    if (k === "start_time" || k === "duration") continue;
    if (k === "__jid__") {
      assert.match(String(x), /^\d{20}$/);
      out[k] = "<jid>";
      continue;
    }
    out[depth === 1 && k.endsWith("_master") ? "<master>" : k] = normalize(x, depth + 1);
  }
  return out;
}

/** salt-run's highstate text without what differs by run: times, durations, the master's id. */
function maskText(t: string): string {
  return t
    .replace(/^(\s*Started: ).*$/gm, "$1<time>")
    .replace(/^(\s*Duration: ).*$/gm, "$1<ms>")
    .replace(/^(\s*Total run time: ).*$/gm, "$1<ms>")
    .replace(/\S+_master/g, "<master>");
}

function golden(name: string): string {
  return JSON.stringify(normalize(JSON.parse(readFileSync(path.join(FIXTURES, "salt-3007", `${name}.json`), "utf8"))), null, 2);
}

describe("orchestrate answers as the Python master does for the same SLS", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  const minions: TestMinion[] = [];

  before(async () => {
    tm = await startTestMaster({ auto_accept: true, id: "brine_master", file_roots: { base: [path.join(FIXTURES, "srv", "salt")] }, pillar_roots: { base: [path.join(FIXTURES, "srv", "pillar")] } });
    const k = await testKeys(2);
    minions.push(fastMinion(tm, "db-1", k[0]!), fastMinion(tm, "web-1", k[1]!));
    await Promise.all(minions.map((m) => m.start()));
  });
  after(async () => {
    for (const m of minions) await m.stop();
    await tm.stop();
  });

  const cases: [string, unknown[], Record<string, unknown>][] = [
    ["deploy", ["orch.deploy"], { pillar: { word: "hello" } }],
    ["failing", ["orch.failing"], {}],
    ["test", ["orch.deploy"], { test: true }],
    ["nope", ["orch.nope"], {}],
    ["requisites", ["orch.requisites"], {}],
    ["requisites-test", ["orch.requisites"], { test: true }],
    ["listen", ["orch.listen"], {}],
    ["listen-test", ["orch.listen"], { test: true }],
  ];
  for (const [name, arg, kwarg] of cases) {
    test(`state.orchestrate ${arg.join(" ")} ${JSON.stringify(kwarg)} (${name}.json)`, async () => {
      const r = await controlCall(tm.sockDir, { op: "run", fun: "state.orchestrate", arg, kwarg });
      assert.equal(r.type, "return", r.message);
      assert.equal(JSON.stringify(normalize(r.ret), null, 2), golden(name));
    });
  }

  for (const [name, args] of [
    ["deploy", ["orch.deploy", 'pillar={"word": "hello"}']],
    ["failing", ["orch.failing"]],
  ] as const) {
    test(`salt-run state.orchestrate ${args.join(" ")} prints what Salt's prints (${name}.highstate.txt)`, async () => {
      const r = await runCli("salt-run", ["-c", writeConfigDir(tm), "state.orchestrate", ...args]);
      assert.equal(r.code, name === "failing" ? 1 : 0, r.stderr);
      assert.equal(maskText(r.stdout), maskText(readFileSync(path.join(FIXTURES, "salt-3007", `${name}.highstate.txt`), "utf8")));
    });
  }
});
