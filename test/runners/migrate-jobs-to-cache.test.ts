/**
 * `salt-run cluster.migrate_jobs_to_cache` (issue #16) over job cache trees a real Python salt-master 3007
 * wrote (test/fixtures/salt-local-cache/, captured by its capture.sh with the real-salt harness: sha256 with a
 * 3007 and a 3006.8 minion, md5 with one minion). After the migration brine's `jobs.list_jobs` and
 * `jobs.lookup_jid` answer what the Python master answered over the same tree; a dry run writes nothing; a
 * second run migrates nothing new; malformed entries are skipped and counted, and the run goes on.
 */
import { runnerOutput } from "../../src/lib/output/display.js";
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { encodeWire } from "../../src/shared/protocol/msgpack.js";
import { repoRoot } from "../helpers/paths.js";
import { runnerHarness } from "./helpers.js";
import type { MigrateResult } from "../../src/lib/store/local-cache-import.js";

const FIXTURES = path.join(repoRoot, "test", "fixtures", "salt-local-cache");
const MIGRATE = "cluster.migrate_jobs_to_cache";


/** What the fixture tree holds, counted independently of the migrator: job directories and return files. */
function census(root: string): { jobs: number; returns: number; jids: string[] } {
  let jobs = 0;
  let returns = 0;
  const jids: string[] = [];
  for (const top of readdirSync(root)) {
    for (const sub of readdirSync(path.join(root, top))) {
      const dir = path.join(root, top, sub);
      jobs++;
      jids.push(readFileSync(path.join(dir, "jid"), "utf8"));
      for (const e of readdirSync(dir)) if (!e.startsWith(".") && statSync(path.join(dir, e)).isDirectory()) returns++;
    }
  }
  return { jobs, returns, jids: jids.sort() };
}

/** Every file of a tree with its content hash (to show the source is left as it was). */
function snapshot(root: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(`${path.relative(root, p)} ${createHash("sha256").update(readFileSync(p)).digest("hex")}`);
    }
  };
  walk(root);
  return out;
}

const golden = (hash: string, file: string) => JSON.parse(readFileSync(path.join(FIXTURES, hash, file), "utf8"));

test("a Python master's sha256 job cache migrates: the dry run writes nothing, list_jobs and lookup_jid then answer as the Python master did, a second run migrates nothing new", async () => {
  const h = runnerHarness({ cfg: { job_cache_store_endtime: true } });
  try {
    // the tree a Python master left in the cachedir brine took over: the default jobs_root
    const root = path.join(h.ctx.cfg.cachedir, "jobs");
    cpSync(path.join(FIXTURES, "sha256", "jobs"), root, { recursive: true });
    const want = census(root);
    assert.ok(want.jobs >= 10 && want.returns >= 10, `fixture: ${JSON.stringify(want)}`);
    const before = snapshot(root);

    const dry = (await h.run(MIGRATE, [], { dry_run: true })) as MigrateResult;
    assert.deepEqual(dry, { status: "ok", scanned: want.jobs, migrated: want.jobs, skipped: 0, returns_migrated: want.returns, returns_skipped: 0, skipped_reasons: {}, dry_run: true, jobs_root: root });
    assert.deepEqual(await h.run("jobs.list_jobs"), {}, "a dry run writes nothing");

    const real = (await h.run(MIGRATE)) as MigrateResult;
    assert.deepEqual(real, { ...dry, dry_run: false });
    assert.deepEqual(snapshot(root), before, "the source tree is left as it was");

    // what the Python master's salt-run answered over the same tree
    const listed = (await h.run("jobs.list_jobs")) as Record<string, unknown>;
    assert.deepEqual(Object.keys(listed).sort(), want.jids);
    assert.deepEqual(listed, golden("sha256", "list_jobs.json"));
    // what salt-run prints (--out json, as captured): a state run's {outputter: highstate, data} shows its data
    for (const jid of want.jids) assert.deepEqual(runnerOutput(await h.run("jobs.lookup_jid", [jid])).data, golden("sha256", `lookup_jid/${jid}.json`), `lookup_jid ${jid}`);

    // what only the job cache shows: expected minions (.minions.p), nocache, out.p
    const loads = [...h.ctx.jobs.loads()];
    const ghost = loads.find(([, l]) => JSON.stringify(l.tgt) === '["a1","ghost"]')![0];
    assert.deepEqual(h.ctx.jobs.expectedMinions(ghost), ["a1"], "Salt's .minions.p lists only the accepted minions a list target names");
    const both = loads.find(([, l]) => l.fun === "cmd.run")![0];
    assert.deepEqual(h.ctx.jobs.expectedMinions(both), ["a1", "b1"]);
    const nocache = loads.filter(([jid]) => h.ctx.jobs.isNocache(jid));
    assert.equal(nocache.length, 1, "the job published with nocache=True");
    const state = loads.find(([, l]) => l.fun === "state.single")![0];
    assert.equal(h.ctx.jobs.returnsFor(state).a1?.out, "highstate", "out.p");

    const again = (await h.run(MIGRATE, [false])) as MigrateResult;
    assert.deepEqual(again, { ...real, migrated: 0, skipped: want.jobs, returns_migrated: 0, skipped_reasons: { "already in the job cache": want.jobs } });
  } finally {
    await h.close();
  }
});

test("a tree written with hash_type md5 (2 + 30 characters) migrates from jobs_root=, as the Python master answers it", async () => {
  const h = runnerHarness();
  try {
    const root = path.join(FIXTURES, "md5", "jobs");
    const want = census(root);
    const before = snapshot(root);
    const r = (await h.run(MIGRATE, [], { jobs_root: root })) as MigrateResult;
    assert.deepEqual({ ...r, skipped_reasons: undefined }, { status: "ok", scanned: want.jobs, migrated: want.jobs, skipped: 0, returns_migrated: want.returns, returns_skipped: 0, skipped_reasons: undefined, dry_run: false, jobs_root: root });
    assert.deepEqual(snapshot(root), before);
    const listed = (await h.run("jobs.list_jobs")) as Record<string, Record<string, unknown>>;
    // this harness keeps job_cache_store_endtime off: Salt's EndTime is the only field left out
    const withoutEnd = Object.fromEntries(Object.entries(golden("md5", "list_jobs.json") as Record<string, Record<string, unknown>>).map(([jid, { EndTime: _e, ...j }]) => [jid, j]));
    assert.deepEqual(listed, withoutEnd);
    for (const jid of want.jids) assert.deepEqual(runnerOutput(await h.run("jobs.lookup_jid", [jid])).data, golden("md5", `lookup_jid/${jid}.json`), `lookup_jid ${jid}`);
  } finally {
    await h.close();
  }
});

test("malformed entries are skipped and counted with their reason, never fatal; a missing tree is a skipped run", async () => {
  const h = runnerHarness();
  try {
    const root = path.join(h.root, "salt-jobs");
    cpSync(path.join(FIXTURES, "sha256", "jobs"), root, { recursive: true });
    const good = census(root);
    const jidDir = (jid: string) => {
      const x = createHash("sha256").update(jid).digest("hex");
      return path.join(root, x.slice(0, 2), x.slice(2));
    };
    const job = (jid: string, files: Record<string, Uint8Array | string>) => {
      const d = jidDir(jid);
      for (const [name, body] of Object.entries(files)) {
        mkdirSync(path.dirname(path.join(d, name)), { recursive: true });
        writeFileSync(path.join(d, name), body);
      }
      return d;
    };
    const load = (jid: string) => encodeWire({ fun: "test.ping", arg: [], tgt: "*", tgt_type: "glob", jid, user: "root" });
    job("20260101000000000001", { jid: "20260101000000000001" }); // a directory Salt's prep_jid left alone
    job("20260101000000000002", { jid: "20260101000000000002", ".load.p": Buffer.from([0xc1, 0xff, 0x00]) });
    job("20260101000000000003", { jid: "20260101000000000003", ".load.p": encodeWire(["not", "a", "map"]) });
    job("20260101000000000004", { jid: "20260101000000000004", ".load.p": load("20260101000000000004"), ".minions.p": encodeWire({ a1: true }) });
    job("20260101000000000005", { jid: "20260101000000000005", ".load.p": load("20260101000000000099") });
    job("20260101000000000006", { jid: "../../etc", ".load.p": load("20260101000000000006") });
    // a good job's directory copied under another name: not the hash of its jid
    const first = readdirSync(root).find((t) => t.length === 2)!;
    cpSync(path.join(root, first, readdirSync(path.join(root, first))[0]!), path.join(root, "ab", "c".repeat(62)), { recursive: true });
    mkdirSync(path.join(root, "zz", "not-a-hash"), { recursive: true });
    writeFileSync(path.join(root, "ab", "stray-file"), "x");
    writeFileSync(path.join(root, "top-level-file"), "x"); // not a directory of the first level: not a job entry
    // a good job whose returns are partly damaged: it migrates, the bad returns are counted
    const ok = job("20260101000000000007", {
      jid: "20260101000000000007",
      ".load.p": load("20260101000000000007"),
      ".minions.p": encodeWire(["r1", "r2", "r3", "r4"]),
      "endtime": "2026, Jan 01 00:00:01.000000\n",
      "r1/return.p": encodeWire({ return: true, retcode: 0, success: true }),
      "r2/return.p": "garbage",
      "r4/return.p": encodeWire("a bare value from an old Salt"),
    });
    mkdirSync(path.join(ok, "r3"));

    const r = (await h.run(MIGRATE, [], { jobs_root: root })) as MigrateResult;
    assert.equal(r.status, "ok");
    assert.equal(r.scanned, good.jobs + 10);
    assert.equal(r.migrated, good.jobs + 1);
    assert.equal(r.skipped, 9);
    assert.equal(r.returns_migrated, good.returns + 2);
    assert.equal(r.returns_skipped, 2);
    assert.deepEqual(r.skipped_reasons, {
      "no .load.p": 1,
      ".load.p is not msgpack": 1,
      ".load.p is not a map": 1,
      ".minions.p is not a list of minion ids": 1,
      "jid and .load.p disagree": 1,
      "no valid jid": 1,
      "directory is not the hash of its jid": 1,
      "not a job directory name": 1,
      "not a directory": 1,
      "return.p is not msgpack": 1,
      "no return.p": 1,
    });
    assert.deepEqual(await h.run("jobs.lookup_jid", ["20260101000000000007"], { missing: true }), { r1: true, r2: "Minion did not return", r3: "Minion did not return", r4: "a bare value from an old Salt" });
    assert.equal(h.ctx.jobs.endtime("20260101000000000007"), "2026, Jan 01 00:00:01.000000");
    for (const n of [1, 2, 3, 4, 5, 6]) assert.equal(h.ctx.jobs.hasLoad(`2026010100000000000${n}`), false);

    const none = (await h.run(MIGRATE, [], { jobs_root: path.join(h.root, "nowhere") })) as MigrateResult;
    assert.equal(none.status, "skipped");
    assert.match(none.reason ?? "", /ENOENT/);
    assert.equal(none.scanned, 0);
  } finally {
    await h.close();
  }
});

test("a tree larger than the writes in flight (migrateJobsInFlightMax): 500 jobs with 3 returns each migrate in one run", async () => {
  const h = runnerHarness();
  try {
    const root = path.join(h.root, "big");
    const jids: string[] = [];
    for (let i = 0; i < 500; i++) {
      const jid = `2026010100${String(i).padStart(10, "0")}`;
      jids.push(jid);
      const x = createHash("sha256").update(jid).digest("hex");
      const d = path.join(root, x.slice(0, 2), x.slice(2));
      mkdirSync(d, { recursive: true });
      writeFileSync(path.join(d, "jid"), jid);
      writeFileSync(path.join(d, ".load.p"), encodeWire({ fun: "test.ping", arg: [], tgt: "*", tgt_type: "glob", jid, user: "root" }));
      for (const id of ["a", "b", "c"]) {
        mkdirSync(path.join(d, id));
        writeFileSync(path.join(d, id, "return.p"), encodeWire({ return: i, retcode: 0, success: true }));
      }
    }
    const r = (await h.run(MIGRATE, [], { jobs_root: root })) as MigrateResult;
    assert.deepEqual([r.scanned, r.migrated, r.skipped, r.returns_migrated], [500, 500, 0, 1500]);
    assert.deepEqual(await h.run("jobs.lookup_jid", [jids[321]!]), { a: 321, b: 321, c: 321 });
    assert.equal(Object.keys((await h.run("jobs.list_jobs")) as object).length, 500);
  } finally {
    await h.close();
  }
});
