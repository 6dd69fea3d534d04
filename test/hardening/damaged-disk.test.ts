/**
 * A damaged disk is reported, not served and not crashed on. The job cache's data.mdb truncated, zero-length,
 * zeroed, overwritten with random bytes or with a torn page: `salt-master` refuses to start with one message
 * naming the file and what to do (before: it printed "ready", then died by SIGBUS/SIGSEGV at the first request
 * that read there, or, for a zero-length file, served a silently empty cache), or with
 * `brine_job_cache_damaged: move_aside` starts with an empty cache and says so. A garbage master.pem stops the
 * start before "ready" (before: "ready", then an uncaught RSA_BAD_KEY). A garbage sessions/<id> file counts as
 * absent and the minion signs in again (before: that minion was locked out for good). Ids of 234 to 255 bytes
 * sign in and run jobs (before: the session key's temp file name exceeded NAME_MAX).
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, truncateSync, writeFileSync, openSync, writeSync, closeSync, statSync } from "node:fs";
import path from "node:path";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { fastMinion, testKeys, waitForEvent } from "../helpers/minions.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { lmdbDir } from "../../src/lib/store/lmdb-env.js";

/** A master with a job cache holding `jobs` loads and returns, stopped, with its files kept. */
async function masterWithJobs(jobs = 3000): Promise<{ tm: TestMaster; conf: string; dataFile: string }> {
  const tm = await startTestMaster({ auto_accept: true });
  const conf = writeConfigDir(tm);
  const store = openStore(tm.cfg);
  const w: Promise<unknown>[] = [];
  for (let i = 0; i < jobs; i++) {
    const jid = `2026112512${String(i).padStart(10, "0")}`;
    w.push(store.loads.put(jid, { fun: "test.ping", tgt: "*", jid, pad: "p".repeat(200) }), store.returns.put(`${jid}/m1`, { return: true }));
  }
  await Promise.all(w);
  await store.close();
  await tm.stop(true);
  return { tm, conf, dataFile: path.join(lmdbDir(tm.cfg), "data.mdb") };
}

/** Deterministic filler bytes (a torn page written by a dying disk). */
function noise(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}

function overwrite(file: string, at: number, bytes: Buffer): void {
  const fd = openSync(file, "r+");
  writeSync(fd, bytes, 0, bytes.length, at);
  closeSync(fd);
}

/** The root page of the main database in the newest meta page (LMDB 1.0 layout, 4 KiB pages). */
function mainRootPage(file: string): number {
  const head = readFileSync(file).subarray(0, 8192);
  const meta = (at: number) => ({ txnid: head.readBigUInt64LE(at + 24 + 128), root: Number(head.readBigUInt64LE(at + 24 + 24 + 48 + 40)) });
  const [a, b] = [meta(0), meta(4096)];
  return (b.txnid > a.txnid ? b : a).root;
}

const DAMAGE: [string, (file: string) => void][] = [
  ["truncated to half its size", (f) => truncateSync(f, Math.floor(statSync(f).size / 2 / 4096) * 4096)],
  ["zero-length", (f) => truncateSync(f, 0)],
  ["zeroed", (f) => writeFileSync(f, Buffer.alloc(statSync(f).size))],
  ["random bytes", (f) => writeFileSync(f, noise(statSync(f).size, 7))],
  ["a torn page (the main database's root)", (f) => overwrite(f, mainRootPage(f) * 4096, noise(4096, 11))],
];

describe("a damaged disk is reported, not served and not crashed on", { timeout: 300_000 }, () => {
  for (const [name, damage] of DAMAGE) {
    test(`job cache ${name}: salt-master refuses to start with one message naming data.mdb`, async () => {
      const { tm, conf, dataFile } = await masterWithJobs();
      try {
        damage(dataFile);
        const r = await runCli("salt-master", ["-c", conf], { timeoutMs: 60_000 });
        const out = r.stdout + r.stderr;
        assert.equal(r.code, 1, out);
        assert.doesNotMatch(out, /ready/);
        assert.match(out, new RegExp(`${dataFile.replace(/[/.]/g, "\\$&")}.*Move .* aside`));
      } finally {
        await tm.stop();
      }
    });
  }

  test("job cache zero-length with brine_job_cache_damaged: move_aside: the master starts empty and says where the old one went", async () => {
    const { tm, dataFile } = await masterWithJobs(10);
    truncateSync(dataFile, 0);
    const m = await startTestMaster({ ...tm.cfg, ret_port: tm.retPort, publish_port: tm.publishPort, brine_job_cache_damaged: "move_aside" } as never, tm.root);
    try {
      const aside = readdirSync(path.dirname(lmdbDir(tm.cfg))).filter((n) => n.startsWith("brine-lmdb.damaged-"));
      assert.equal(aside.length, 1);
      assert.equal(statSync(path.join(path.dirname(lmdbDir(tm.cfg)), aside[0]!, "data.mdb")).size, 0);
    } finally {
      await m.stop();
    }
  });

  test("a garbage master.pem stops the start before ready with a message naming it", async () => {
    const { tm, conf } = await masterWithJobs(1);
    try {
      writeFileSync(path.join(tm.pkiDir, "master.pem"), "-----BEGIN RSA PRIVATE KEY-----\nnot a key\n-----END RSA PRIVATE KEY-----\n");
      const r = await runCli("salt-master", ["-c", conf], { timeoutMs: 60_000 });
      const out = r.stdout + r.stderr;
      assert.equal(r.code, 1, out);
      assert.doesNotMatch(out, /ready/);
      assert.match(out, /master\.pem/);
    } finally {
      await tm.stop();
    }
  });

  test("a garbage sessions/<id> file counts as absent: the minion signs in again and runs jobs", async () => {
    const tm = await startTestMaster({ auto_accept: true });
    const [k] = await testKeys(1);
    const m = fastMinion(tm, "garbage-session", k!);
    try {
      await m.start();
      writeFileSync(path.join(tm.cachedir, "sessions", "garbage-session"), noise(300, 3));
      await tm.server.stop();
      const tm2 = await startTestMaster({ ...tm.cfg, ret_port: tm.retPort, publish_port: tm.publishPort } as never, tm.root);
      try {
        const conf = writeConfigDir(tm2);
        const r = await runCli("salt", ["-c", conf, "garbage-session", "test.ping", "--out", "json", "-t", "20"]);
        assert.deepEqual(JSON.parse(r.stdout), { "garbage-session": true }, r.stdout + r.stderr);
        assert.match(readFileSync(path.join(tm.cachedir, "sessions", "garbage-session"), "latin1"), /^[A-Za-z0-9+/]{75}=\n?/);
      } finally {
        await m.stop();
        await tm2.stop();
      }
    } catch (e) {
      await m.stop();
      throw e;
    }
  });

  for (const bytes of [240, 255]) {
    test(`a minion id of ${bytes} bytes signs in and runs a job`, async () => {
      const tm = await startTestMaster({ auto_accept: true });
      const conf = writeConfigDir(tm);
      const id = "l".repeat(bytes);
      const [k] = await testKeys(1);
      const m = fastMinion(tm, id, k!);
      try {
        await m.start();
        const r = await runCli("salt", ["-c", conf, id, "test.ping", "--out", "json", "-t", "20"]);
        assert.deepEqual(JSON.parse(r.stdout), { [id]: true }, r.stderr);
        assert.ok(existsSync(path.join(tm.cachedir, "sessions", id)));
      } finally {
        await m.stop();
        await tm.stop();
      }
    });
  }
  void waitForEvent;
});
