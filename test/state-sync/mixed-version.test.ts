/**
 * State-sync between two builds (a rolling upgrade): this checkout's engine against the engine of earlier commits,
 * each built from git by tools/build-at-commit.ts and run in this process, their peer messages relayed as the main
 * thread relays them (CBOR bytes both ways):
 * - 0c11706, before the compact wire forms (hex hashes, items fetched by range only);
 * - d5103db, the compact forms, manifests kept in a CBOR file, no range summaries;
 * - 02a7407, flat range summaries (about √n ranges without counts), before the tree of summaries;
 * - e7f19c2, the tree of summaries, before deflated replies (`z: 1`, wire.ts): its puller does not ask for them, its
 *   server does not send them.
 * Each pair both ways (old puller from a new server, new puller from an old server): keys and file_roots with
 * more items than a range summary needs, a file larger than one chunk; then one file changed, one removed and one
 * key deleted at the server, pulled again: both sides end with the same files. And an upgrade in place: a manifest
 * an old build kept (with a tombstone) is read by this build.
 * Skips only when the commits are not in the git history (a shallow clone); building them takes about 15 s each.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { buildAtCommit } from "../../tools/build-at-commit.js";
import { cbor } from "../../src/shared/cbor.js";
import type { FromEngine, ToEngine } from "../../src/workers/state-sync/messages.js";
import { relayEngines, startEngine, type EngineBuild, type EngineSide } from "../helpers/state-sync-pair.js";

const OLD = [
  { commit: "0c11706", what: "before the compact wire forms" },
  { commit: "d5103db", what: "compact forms, no range summaries" },
  { commit: "02a7407", what: "flat range summaries, no tree" },
  { commit: "e7f19c2", what: "the tree of summaries, replies not deflated" },
];
const ENTRIES = ["src/workers/state-sync/engine.ts", "src/lib/store/lmdb-env.ts"];
const repo = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..", "..", "..");

interface Build extends EngineBuild {
  name: string;
}

async function load(name: string, dist: string): Promise<Build> {
  const eng = (await import(pathToFileURL(path.join(dist, "src/workers/state-sync/engine.js")).href)) as { StateSyncEngine: Build["Engine"] };
  const st = (await import(pathToFileURL(path.join(dist, "src/lib/store/lmdb-env.js")).href)) as { openStore: Build["openStore"] };
  return { name, Engine: eng.StateSyncEngine, openStore: st.openStore };
}

const pub = generateKeyPairSync("rsa", { modulusLength: 2048, publicKeyEncoding: { type: "spki", format: "pem" }, privateKeyEncoding: { type: "pkcs1", format: "pem" } }).publicKey;

/** The server's content: 3 accepted keys and one rejected, 300 small files in 3 directories and one of 1.5 MiB. */
function seed(root: string): void {
  const pki = path.join(root, "pki");
  for (const [dir, id] of [["minions", "k1"], ["minions", "k2"], ["minions", "k3"], ["minions_rejected", "k4"]] as const) {
    mkdirSync(path.join(pki, dir), { recursive: true });
    writeFileSync(path.join(pki, dir, id), pub);
  }
  for (let i = 0; i < 300; i++) {
    const dir = path.join(root, "srv", "salt", `d${i % 3}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `f${i}.sls`), `file ${i}\n`);
  }
  const big = Buffer.alloc(1536 * 1024);
  for (let o = 0; o < big.length; o += 32) createHash("sha256").update(String(o)).digest().copy(big, o);
  writeFileSync(path.join(root, "srv", "salt", "big.bin"), big);
}

/** Every file under a side's key directories and file_roots: relative path → sha256. */
function tree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string, rel: string) => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const n of names) {
      if (n.startsWith(".brine-")) continue;
      const full = path.join(dir, n);
      if (statSync(full).isDirectory()) walk(full, `${rel}/${n}`);
      else out[`${rel}/${n}`] = createHash("sha256").update(readFileSync(full)).digest("hex");
    }
  };
  walk(path.join(root, "pki"), "pki");
  walk(path.join(root, "srv", "salt"), "salt");
  return out;
}

async function pair(serverBuild: Build, pullerBuild: Build): Promise<void> {
  const top = mkdtempSync(path.join(os.tmpdir(), "brine-mixed-"));
  const [sRoot, pRoot] = [path.join(top, "server"), path.join(top, "puller")];
  mkdirSync(path.join(pRoot, "srv", "salt"), { recursive: true });
  seed(sRoot);
  const server = startEngine("server", sRoot, serverBuild);
  const puller = startEngine("puller", pRoot, pullerBuild);
  const what = `${pullerBuild.name} puller from a ${serverBuild.name} server`;
  try {
    const l = relayEngines(puller, server);
    const first = await l.pull(["keys", "file_roots"]);
    assert.deepEqual(first.errors, [], what);
    assert.equal(first.failed, undefined, what);
    assert.equal(first.items, 4 + 301, what);
    assert.deepEqual(tree(pRoot), tree(sRoot), `${what}: the same files after the join`);
    // a change, a removal and a deleted key at the server (stamps a moment later than the puller's copies)
    await new Promise((r) => setTimeout(r, 20));
    writeFileSync(path.join(sRoot, "srv", "salt", "d1", "f7.sls"), "changed\n");
    unlinkSync(path.join(sRoot, "srv", "salt", "d2", "f8.sls"));
    unlinkSync(path.join(sRoot, "pki", "minions", "k2"));
    const again = await l.pull(["keys", "file_roots"]);
    assert.deepEqual([again.items, again.deleted, again.errors], [1, 2, []], `${what}: ${JSON.stringify(again)}`);
    assert.deepEqual(tree(pRoot), tree(sRoot), `${what}: the same files after the resync`);
  } finally {
    await puller.close();
    await server.close();
    rmSync(top, { recursive: true, force: true });
  }
}

/** An old build keeps a manifest with a tombstone; this build, started on the same directories, serves the tombstone. */
async function upgradeInPlace(oldBuild: Build, newBuild: Build): Promise<void> {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-upgrade-"));
  try {
    seed(root);
    // a peer's first manifest request (the form every build answers with pages)
    const probe = (s: EngineSide) =>
      new Promise<{ p: string; d?: number }[]>((resolve) => {
        const on = (m: FromEngine) => {
          if (m.k !== "res" || m.id !== 7) return;
          s.port.off("message", on);
          resolve((decode(m.v as Uint8Array) as { entries: { p: string; d?: number }[] }).entries);
        };
        s.port.on("message", on);
        s.port.postMessage({ k: "in", id: 7, from: "asker", p: encode({ op: "manifest", ch: "file_roots", n: 1000 }), req: true } satisfies ToEngine);
      });
    const old = startEngine("node", root, oldBuild);
    assert.equal((await probe(old)).length, 301);
    unlinkSync(path.join(root, "srv", "salt", "d0", "f3.sls"));
    const seen = await probe(old);
    assert.deepEqual(seen.find((e) => e.p === "base/d0/f3.sls")?.d, 1, `${oldBuild.name}: a tombstone`);
    await old.close();
    const now = startEngine("node", root, newBuild);
    try {
      const served = await probe(now);
      assert.equal(served.length, 301);
      assert.deepEqual(served.find((e) => e.p === "base/d0/f3.sls")?.d, 1, `the tombstone ${oldBuild.name} kept, served by this build`);
    } finally {
      await now.close();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const encode = (v: unknown) => cbor.encode(v) as Uint8Array;
const decode = (b: Uint8Array) => cbor.decode(b) as unknown;

for (const o of OLD) {
  test(`state-sync between this build and ${o.commit} (${o.what}), both ways, join and resync; an old build's manifest is read after an upgrade in place`, { timeout: 240_000 }, async (t) => {
    const b = buildAtCommit(repo, o.commit, ENTRIES);
    if ("unavailable" in b) {
      t.skip(b.unavailable);
      return;
    }
    const oldBuild = await load(o.commit, path.join(b.dir, "dist"));
    const newBuild = await load("this", path.join(repo, "dist"));
    await pair(newBuild, oldBuild);
    await pair(oldBuild, newBuild);
    await upgradeInPlace(oldBuild, newBuild);
  });
}
