/**
 * The drop file that asks a master to rotate its publish AES key (`salt-key -d` writes it; the master's
 * maintenance loop reads and removes it), written as Salt 3007's crypt.dropfile does.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { writeDropFile } from "../../src/lib/pki/key-actions.js";

test("a drop file appears whole: read-only, the master's id in it, nothing left beside it", () => {
  const cachedir = mkdtempSync(path.join(os.tmpdir(), "brine-dfn-"));
  try {
    writeDropFile({ cachedir, id: "m1_master" });
    const dfn = path.join(cachedir, ".dfn");
    assert.equal(readFileSync(dfn, "utf8"), "m1_master");
    assert.equal(statSync(dfn).mode & 0o777, 0o400);
    assert.deepEqual(readdirSync(cachedir), [".dfn"]);
  } finally {
    rmSync(cachedir, { recursive: true, force: true });
  }
});

test("a drop file already waiting is left as it is: the rotation is asked for already", () => {
  const cachedir = mkdtempSync(path.join(os.tmpdir(), "brine-dfn-"));
  try {
    const dfn = path.join(cachedir, ".dfn");
    writeFileSync(dfn, "other_master", { mode: 0o400 });
    writeDropFile({ cachedir, id: "m1_master" });
    assert.equal(readFileSync(dfn, "utf8"), "other_master");
    assert.deepEqual(readdirSync(cachedir), [".dfn"]);
  } finally {
    rmSync(cachedir, { recursive: true, force: true });
  }
});

test("writing the drop file never fails because the master removed it the moment it appeared", async () => {
  const cachedir = mkdtempSync(path.join(os.tmpdir(), "brine-dfn-"));
  const dfn = path.join(cachedir, ".dfn");
  // the master's side, as fast as it can: read the file when it is there, then remove it (maintenance.ts)
  const stop = new Int32Array(new SharedArrayBuffer(4));
  const master = new Worker(
    `const { workerData } = require("node:worker_threads");
     const fs = require("node:fs");
     const { dfn, stop } = workerData;
     let removed = 0, seen = [];
     require("node:worker_threads").parentPort.postMessage("ready");
     while (Atomics.load(stop, 0) === 0) {
       if (!fs.existsSync(dfn)) continue;
       try { seen.push(fs.readFileSync(dfn, "utf8")); } catch {}
       try { fs.unlinkSync(dfn); removed++; } catch {}
     }
     require("node:worker_threads").parentPort.postMessage({ removed, odd: seen.filter((s) => s !== "m1_master").length });`,
    { eval: true, workerData: { dfn, stop } },
  );
  const next = () => new Promise<unknown>((resolve, reject) => {
    master.once("message", resolve);
    master.once("error", reject);
  });
  assert.equal(await next(), "ready");
  const result = next() as Promise<{ removed: number; odd: number }>;
  const failures: string[] = [];
  try {
    for (let i = 0; i < 4000; i++) {
      try {
        writeDropFile({ cachedir, id: "m1_master" });
      } catch (e) {
        failures.push((e as Error).message);
      }
    }
  } finally {
    Atomics.store(stop, 0, 1);
  }
  const { removed, odd } = await result;
  await master.terminate();
  rmSync(cachedir, { recursive: true, force: true });
  assert.ok(removed > 0, "the master's side removed drop files while they were written");
  assert.deepEqual(failures.slice(0, 3), [], `${failures.length} of 4,000 writes failed`);
  // the master never read a drop file half written (empty: a 3006-style request for any master)
  assert.equal(odd, 0);
  assert.equal(existsSync(`${dfn}-next`), false);
});
