/**
 * Two request threads creating the same minion's session key at once (a re-sent `_auth` answered by
 * two workers) must agree on one key: creating never replaces a key another thread just made, and
 * every thread reads back what is on disk.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { SessionKeys, writeSessionKeyFile } from "../../src/lib/store/sessions.js";

test("creating a session key file that another thread already created keeps the existing key", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-sess-"));
  const file = path.join(dir, "m1");
  writeFileSync(file, "K1-written-by-the-other-thread");
  writeSessionKeyFile(file, "create");
  assert.equal(readFileSync(file, "utf8"), "K1-written-by-the-other-thread");
  assert.deepEqual(readdirSync(dir), ["m1"], "no temp file left behind");
  writeSessionKeyFile(file, "replace");
  assert.notEqual(readFileSync(file, "utf8"), "K1-written-by-the-other-thread", "an expired key is replaced");
  rmSync(dir, { recursive: true, force: true });
});

test("a key's creation time, which orders keys across masters, is the sessions clock's to the millisecond", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-sess-"));
  // ms values the kernel's coarse write stamp would not produce by chance
  const created = 1_790_000_000_123;
  writeSessionKeyFile(path.join(dir, "m1"), "create", created);
  assert.equal(Math.floor(statSync(path.join(dir, "m1")).mtimeMs), created);
  const clock = 1_790_000_000_457;
  const created2: number[] = [];
  const s = new SessionKeys(dir, 86400, () => clock);
  s.track((c) => created2.push(c.t));
  s.get("m2");
  assert.deepEqual(created2, [clock], "the key a master reports to its peers carries the clock's creation time");
  rmSync(dir, { recursive: true, force: true });
});

test("concurrent first use from four threads: every thread returns the key that is on disk", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-sess-"));
  const sessions = new URL("../../src/lib/store/sessions.js", import.meta.url).href;
  const code = `
    import { workerData, parentPort } from "node:worker_threads";
    const { SessionKeys } = await import(workerData.sessions);
    const s = new SessionKeys(workerData.dir, 86400);
    const out = [];
    for (let i = 0; i < 50; i++) out.push(s.get("race-" + i).key);
    parentPort.postMessage(out);`;
  const run = () =>
    new Promise<string[]>((resolve, reject) => {
      const w = new Worker(code, { eval: true, workerData: { sessions, dir } });
      w.once("message", resolve);
      w.once("error", reject);
    });
  const results = await Promise.all([run(), run(), run(), run()]);
  for (let i = 0; i < 50; i++) {
    const onDisk = readFileSync(path.join(dir, "sessions", `race-${i}`), "latin1").trim();
    for (const r of results) assert.equal(r[i], onDisk, `race-${i}`);
  }
  rmSync(dir, { recursive: true, force: true });
});

test("a request sealed with a key another thread wrote a moment ago is opened at once, within the re-read throttle", async () => {
  const { Crypticle } = await import("../../src/shared/protocol/crypticle.js");
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-sess-"));
  try {
    const clock = 1_790_000_000_000;
    const s = new SessionKeys(dir, 86400, () => clock); // the request thread: its clock stands still
    const old = s.get("m1").key;
    // the clear lane's thread (a sign-in after the key file was purged) writes a new key in the same millisecond
    const file = path.join(s.dir, "m1");
    writeSessionKeyFile(file, "replace", clock + 1);
    const fresh = readFileSync(file, "latin1").split("\n")[0]!.trim();
    assert.notEqual(fresh, old);
    const sealed = new Crypticle(fresh).dumps({ cmd: "_minion_event", tag: "t" }) as Buffer;
    assert.deepEqual(s.get("m1").crypticle.loads(sealed), { cmd: "_minion_event", tag: "t" });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
