/**
 * Real salt-minions (3007.x, envelope v3, and 3006.8, envelope v2) run the fixture state tree
 * (test/fixtures/state-tree) from brine's fileserver with pillar from brine: a `file.managed` from
 * `salt://` rendered with `template: jinja` from pillar values, a `file.directory`, a `cmd.run` with
 * `unless`; every state returns `result: True`. Also `state.apply <sls>`, `state.sls`, `pillar.items`,
 * `cp.get_file salt://…`, `file.recurse`, `saltutil.sync_all` (a custom module), `-I` targeting, and a pillar render
 * error reaching the minion as `_errors`. Skips with a message when Salt's source is absent.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestMaster } from "../helpers/master.js";
import { realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { copyTree, fixture, startFsMaster, tempRoot, writeTree } from "./helpers.js";

const skip = realSaltSkipReason(["3007.x", "v3006.8"]);
const MINIONS = { "fs-new": "3007.x", "fs-old": "v3006.8" } as const;

/** Salt's json outputter prints one document per minion; read them all into one map. */
function parseJsonDocs(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  let depth = 0;
  let start = -1;
  let inStr = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inStr) {
      if (c === "\\") i++;
      else if (c === '"') inStr = false;
      continue;
    }
    if (c === '"') inStr = true;
    else if (c === "{") {
      if (depth++ === 0) start = i;
    } else if (c === "}" && --depth === 0) Object.assign(out, JSON.parse(text.slice(start, i + 1)));
  }
  return out;
}

describe("state.apply from real salt-minions against brine's fileserver and pillar", { skip, timeout: 900_000 }, () => {
  let tm: TestMaster;
  let conf: string;
  let out: string;
  let pillarDir: string;
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rsfs-"));
  const salt = async (...a: string[]) => {
    const r = await runCli("salt", ["-c", conf, ...a, "--out", "json", "-t", "90"], { timeoutMs: 300_000 });
    return { ...r, docs: parseJsonDocs(r.stdout) };
  };

  before(async () => {
    const dir = tempRoot("brine-rs-");
    out = path.join(dir, "out");
    pillarDir = path.join(dir, "srv", "pillar");
    copyTree(fixture("state-tree", "salt"), path.join(dir, "srv", "salt"));
    copyTree(fixture("state-tree", "pillar"), pillarDir);
    writeTree(pillarDir, {
      "brine_test.sls": `include:\n  - users\nbrine_test:\n  root: ${out}/{{ grains['id'] }}\n  greeting: Hello from brine pillar\n`,
    });
    tm = await startFsMaster({ worker_threads: 2 }, dir);
    conf = writeConfigDir(tm);
    await Promise.all(Object.entries(MINIONS).map(([id, ref]) => startRealMinion(runDir, id, tm.retPort, tm.publishPort, ref)));
  });
  after(async () => {
    stopRealMinions(runDir);
    await tm?.stop();
    rmSync(runDir, { recursive: true, force: true });
  });

  test("saltutil.sync_all (before any highstate, which would sync too) delivers a custom module from salt://_modules, which then runs", async () => {
    const r = await salt("*", "saltutil.sync_all");
    for (const id of Object.keys(MINIONS)) {
      assert.deepEqual(((r.docs[id] as Record<string, unknown>).modules as string[]).sort(), ["modules.brinetest"], id);
    }
    const h = await salt("*", "brinetest.hello");
    for (const id of Object.keys(MINIONS)) assert.equal(h.docs[id], "hello from the brine fileserver");
  });

  test("state.apply (highstate via top.sls): every state of both minions returns result True", async () => {
    const r = await salt("*", "state.apply");
    for (const id of Object.keys(MINIONS)) {
      const states = r.docs[id] as Record<string, { result: boolean; __id__: string }>;
      assert.ok(states && typeof states === "object" && !Array.isArray(states), `${id}: ${r.stdout.slice(0, 2000)} ${r.stderr}`);
      const ids = Object.values(states).map((s) => s.__id__).sort();
      assert.deepEqual(ids, ["webapp-config", "webapp-dir", "webapp-marker"], id);
      for (const [k, s] of Object.entries(states)) assert.equal(s.result, true, `${id} ${k}`);
      const cfg = readFileSync(path.join(out, id, "app", "config.txt"), "utf8");
      assert.equal(cfg, "# managed by brine's state tree fixture\ngreeting=Hello from brine pillar\nuser=alice\nuser=bob\n");
      assert.ok(existsSync(path.join(out, id, "app", "marker")));
    }
  });

  test("state.sls again: nothing to change, the cmd.run is skipped by its unless", async () => {
    const r = await salt("*", "state.sls", "webapp");
    for (const id of Object.keys(MINIONS)) {
      const states = Object.values(r.docs[id] as Record<string, { result: boolean; comment: string; __id__: string }>);
      assert.ok(states.every((s) => s.result === true), `${id}: ${r.stdout.slice(0, 1500)}`);
      assert.equal(states.find((s) => s.__id__ === "webapp-marker")?.comment, "unless condition is true");
    }
  });

  test("state.apply of a named SLS", async () => {
    const r = await salt("fs-new", "state.apply", "webapp.extra");
    const states = Object.values(r.docs["fs-new"] as Record<string, { result: boolean }>);
    assert.equal(states.length, 1);
    assert.equal(states[0]!.result, true);
    assert.equal(readFileSync(path.join(out, "fs-new", "extra.txt"), "utf8").trim(), "extra state from brine");
  });

  test("file.recurse from salt:// (file, dir and empty-dir lists with a prefix)", async () => {
    const r = await salt("*", "state.apply", "webapp.recurse");
    for (const id of Object.keys(MINIONS)) {
      const states = Object.values(r.docs[id] as Record<string, { result: boolean }>);
      assert.ok(states.length === 1 && states[0]!.result === true, `${id}: ${r.stdout.slice(0, 1500)}`);
      assert.equal(readFileSync(path.join(out, id, "tree", "sub", "two.txt"), "utf8"), "two\n");
      assert.ok(existsSync(path.join(out, id, "tree", "empty", ".keep")));
    }
  });

  test("pillar.items shows the compiled pillar with its include", async () => {
    const r = await salt("*", "pillar.items");
    for (const id of Object.keys(MINIONS)) {
      assert.deepEqual((r.docs[id] as Record<string, unknown>).brine_test, {
        users: ["alice", "bob"],
        root: path.join(out, id),
        greeting: "Hello from brine pillar",
      });
    }
  });

  test("cp.get_file salt://… copies the file bit-exact", async () => {
    const dest = path.join(out, "copied.jinja");
    const r = await salt("fs-old", "cp.get_file", "salt://webapp/files/config.txt.jinja", dest);
    assert.equal(r.docs["fs-old"], dest);
    assert.equal(readFileSync(dest, "utf8"), readFileSync(fixture("state-tree", "salt", "webapp", "files", "config.txt.jinja"), "utf8"));
  });

  test("-I pillar targeting uses the minion data cache", async () => {
    const r = await salt("-I", `brine_test:root:${path.join(out, "fs-old")}`, "test.ping");
    assert.deepEqual(r.docs, { "fs-old": true });
  });

  test("a broken pillar SLS reaches the minion as _errors after saltutil.refresh_pillar", async () => {
    writeTree(pillarDir, { "top.sls": "base:\n  '*':\n    - brine_test\n    - broken\n", "broken.sls": "x: {{ nope.missing }}\n" });
    await salt("fs-new", "saltutil.refresh_pillar");
    const r = await salt("fs-new", "pillar.items");
    const p = r.docs["fs-new"] as Record<string, unknown>;
    assert.deepEqual(p._errors, ["Rendering SLS 'broken' failed. Please see master log for details."]);
    assert.equal((p.brine_test as Record<string, unknown>).greeting, "Hello from brine pillar");
  });
});
