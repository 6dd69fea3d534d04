/**
 * Orchestration with real salt-minions (3007.x) against brine: the SLS tree of test/fixtures/orchestrate, its
 * minion states served by brine's file server and run by the real minions' state system, the orchestration run by
 * brine. The answer is compared with what the Python master answered for the same files (salt-3007/*.json), as
 * orchestrate-golden.test.ts compares brine's test minions. Skips without Salt's source (SALT_GIT_DIR).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { controlCall } from "../../src/lib/client/control-client.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { repoRoot } from "../helpers/paths.js";
import { realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";

const skip = realSaltSkipReason(["3007.x"]);
const FIXTURES = path.join(repoRoot, "test", "fixtures", "orchestrate");

function normalize(v: unknown, depth = 0): unknown {
  if (Array.isArray(v)) return v.map((x) => normalize(x, depth + 1));
  if (v === null || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    if (k === "start_time" || k === "duration") continue;
    out[depth === 1 && k.endsWith("_master") ? "<master>" : k] = k === "__jid__" ? "<jid>" : normalize(x, depth + 1);
  }
  return out;
}

describe("state.orchestrate with real salt-minions", { skip, timeout: 300_000 }, () => {
  let m: TestMaster;
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-orch-"));

  before(async () => {
    m = await startTestMaster({ auto_accept: true, id: "brine_master", file_roots: { base: [path.join(FIXTURES, "srv", "salt")] }, pillar_roots: { base: [path.join(FIXTURES, "srv", "pillar")] } });
    await Promise.all([startRealMinion(runDir, "db-1", m.retPort, m.publishPort), startRealMinion(runDir, "web-1", m.retPort, m.publishPort)]);
  });
  after(async () => {
    stopRealMinions(runDir);
    await m?.stop();
  });

  for (const [name, arg, kwarg] of [
    ["deploy", ["orch.deploy"], { pillar: { word: "hello" } }],
    ["failing", ["orch.failing"], {}],
    ["test", ["orch.deploy"], { test: true }],
  ] as const) {
    test(`${name}: the same answer as the Python master's`, async () => {
      const r = await controlCall(m.sockDir, { op: "run", fun: "state.orchestrate", arg: [...arg], kwarg: { ...kwarg } });
      assert.equal(r.type, "return", r.message);
      const want = JSON.parse(readFileSync(path.join(FIXTURES, "salt-3007", `${name}.json`), "utf8"));
      assert.equal(JSON.stringify(normalize(r.ret), null, 2), JSON.stringify(normalize(want), null, 2));
    });
  }
});
