/**
 * The salt-master process stops cleanly on SIGTERM (exit 0, in-flight work finished, nothing left
 * listening); the job cache forgets jobs older than keep_jobs_seconds and keeps newer ones.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { formatJid } from "../../src/shared/protocol/jid.js";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { freePort } from "../helpers/master.js";
import { CLI_DIR } from "../helpers/cli.js";

test("SIGTERM: salt-master finishes, closes its sockets and exits 0", async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-term-"));
  const [ret, pub] = [await freePort(), await freePort()];
  mkdirSync(path.join(root, "etc"), { recursive: true });
  writeFileSync(path.join(root, "etc", "master"), `root_dir: ${root}\ninterface: 127.0.0.1\nret_port: ${ret}\npublish_port: ${pub}\nworker_threads: 1\n`);
  const p = spawn(process.execPath, [new URL("salt-master.js", CLI_DIR).pathname, "-c", path.join(root, "etc"), "-l", "quiet"]);
  let out = "";
  p.stdout.on("data", (d) => (out += d));
  // a loaded CI box can take a while to start a master: wait up to a minute for it to say it is ready
  for (let i = 0; i < 600 && !out.includes("ready"); i++) await new Promise((r) => setTimeout(r, 100));
  assert.match(out, /ready/);
  assert.ok(existsSync(path.join(root, "var", "run", "salt", "master", "brine_ctl.ipc")));
  p.kill("SIGTERM");
  const code = await new Promise((r) => p.on("close", r));
  assert.equal(code, 0);
  const refused = await new Promise<boolean>((resolve) => {
    const s = net.connect(ret, "127.0.0.1");
    s.on("connect", () => {
      s.destroy();
      resolve(false);
    });
    s.on("error", () => resolve(true));
  });
  assert.ok(refused, "the request port is closed");
  rmSync(root, { recursive: true, force: true });
});

test("job cache cleanup removes jobs older than keep_jobs_seconds and keeps the rest", async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-clean-"));
  const store = openStore({ cachedir: root, brine_lmdb_map_bytes: masterDefaults().brine_lmdb_map_bytes });
  const jobs = new JobCache(store);
  const now = Date.UTC(2026, 10, 21, 12, 0, 0);
  const oldJid = formatJid(now - 3 * 86400_000, 0);
  const newJid = formatJid(now - 3600_000, 0);
  for (const jid of [oldJid, newJid]) {
    await jobs.saveLoad(jid, { fun: "test.ping", jid }, ["m1"]);
    assert.equal(await jobs.saveReturn(jid, "m1", { return: true }, false), true);
  }
  assert.equal(await jobs.saveReturn(newJid, "m1", { return: "again" }, false), false, "a second return is refused");
  const { removed, alongside } = await jobs.prune(86400, now, { now: () => 0, pause: async () => undefined });
  assert.equal(removed + alongside, 4, "the old job's return, expected minions, list entry and load");
  assert.equal(jobs.getLoad(oldJid), undefined);
  assert.deepEqual(jobs.returnsFor(oldJid), {});
  assert.deepEqual(jobs.returnsFor(newJid), { m1: { return: true } });
  assert.deepEqual(await jobs.prune(0, now), { removed: 0, passes: 0, alongside: 0 }, "keep_jobs_seconds 0 keeps everything");
  assert.deepEqual(jobs.returnsFor(newJid), { m1: { return: true } });
  await store.close();
  rmSync(root, { recursive: true, force: true });
});
