/**
 * brine's fileserver replies have the shapes (and, for the same tree, the values) a real 3007 master
 * sent in the captured state.apply: `_master_opts` keys in order, `_file_envs`, `_file_list`,
 * `_file_hash` (sha256 of the same bytes), `_file_find` (10-int stat, back "roots"), `_serve_file`
 * chunks and its end-of-file reply, `_master_tops`, and the "missing" replies.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { TestMaster } from "../helpers/master.js";
import { chosen } from "../helpers/fixtures.js";
import { fixturesDir } from "../helpers/paths.js";
import { ask, copyTree, minion, startFsMaster, tempRoot } from "./helpers.js";

type Decoded = { decoded: Record<string, unknown> };
function golden(name: string): { request: Record<string, unknown>; reply: unknown } {
  const req = chosen("v3-3007", `${name}-request`) as unknown as Decoded;
  const rep = chosen("v3-3007", `${name}-reply`) as unknown as Decoded;
  const pick = (d: Decoded, prefix: string) => Object.entries(d.decoded).find(([k]) => k.startsWith(prefix))?.[1];
  return { request: pick(req, "load_decrypted") as Record<string, unknown>, reply: pick(rep, "decrypted") };
}

describe("fileserver replies match the captured real master", () => {
  let tm: TestMaster;
  let m: TestMinion;

  before(async () => {
    const dir = tempRoot();
    copyTree(path.join(fixturesDir, "v3-3007", "srv", "salt"), path.join(dir, "srv", "salt"));
    copyTree(path.join(fixturesDir, "v3-3007", "srv", "pillar"), path.join(dir, "srv", "pillar"));
    tm = await startFsMaster({}, dir);
    m = await minion(tm, "m1", 0);
  });
  after(async () => {
    await m?.stop();
    await tm?.stop();
  });

  /** Replay the captured request's load (without nonce/tok/ts/id, which the channel adds). */
  async function replay(name: string): Promise<{ mine: unknown; theirs: unknown }> {
    const g = golden(name);
    const { cmd, nonce: _n, ts: _t, tok: _k, id: _i, ...load } = g.request;
    return { mine: await ask(m, String(cmd), load), theirs: g.reply };
  }

  test("_master_opts: same keys in the same order, same values for the same config", async () => {
    const { mine, theirs } = await replay("master-opts");
    assert.deepEqual(Object.keys(mine as object), Object.keys(theirs as object));
    assert.deepEqual(mine, theirs);
  });

  test("_file_envs", async () => {
    const { mine, theirs } = await replay("file-envs");
    assert.deepEqual(mine, theirs);
  });

  test("_file_list of the same tree", async () => {
    const { mine, theirs } = await replay("file-list");
    assert.deepEqual(mine, theirs);
  });

  test("_file_hash of the same file", async () => {
    const { mine, theirs } = await replay("file-hash");
    assert.deepEqual(mine, theirs);
  });

  test("_file_find: the same keys, rel and backend, a 10-int stat with the same size", async () => {
    const { mine, theirs } = await replay("file-find");
    const a = mine as Record<string, unknown>;
    const b = theirs as Record<string, unknown>;
    assert.deepEqual(Object.keys(a), Object.keys(b));
    assert.equal(a.rel, b.rel);
    assert.equal(a.back, b.back);
    assert.equal((a.stat as unknown[]).length, 10);
    assert.ok((a.stat as unknown[]).every((x) => Number.isInteger(x)));
    assert.equal((a.stat as number[])[6], (b.stat as number[])[6]);
    assert.ok(String(a.path).endsWith("/srv/salt/top.sls"));
  });

  test("_serve_file first chunk and end-of-file chunk", async () => {
    for (const name of ["serve-file", "serve-file-eof"]) {
      const { mine, theirs } = await replay(name);
      const a = mine as Record<string, unknown>;
      const b = theirs as Record<string, unknown>;
      assert.equal(a.dest, b.dest);
      assert.equal(Buffer.isBuffer(a.data) ? a.data.toString() : a.data, b.data);
    }
  });

  test("_master_tops", async () => {
    const { mine, theirs } = await replay("master-tops");
    assert.deepEqual(mine, theirs);
  });

  test("missing file: _file_hash and _file_find", async () => {
    for (const name of ["file-hash-missing", "file-find-missing"]) {
      const { mine, theirs } = await replay(name);
      assert.deepEqual(mine, theirs);
    }
  });
});
