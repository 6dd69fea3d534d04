/**
 * Property-based fuzzing (fast-check, bounded runs) of the peer-publish and file-push handlers with every door
 * open (`peer: {'.*': ['.*']}`, `file_recv: True`): random loads built from hostile path segments, locs, data,
 * targets and functions. Each answer is one of Salt's (`{}`, `{jid, minions}`, returns, True, False), no handler
 * throws or rejects, and nothing is ever written outside `cachedir/minions/<id>/files`.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import fc from "fast-check";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { MasterContext, newEffects } from "../../src/workers/req-handler/context.js";
import { AES_FUNCS } from "../../src/workers/req-handler/aes-funcs.js";
import { loadOrCreateKeyPair } from "../../src/lib/pki/master-keys.js";
import { KeyStore } from "../../src/lib/pki/key-store.js";
import { ensureRootKey } from "../../src/lib/pki/root-key.js";
import { SharedSecrets } from "../../src/shared/secrets.js";
import { NonceSet } from "../../src/shared/nonce-set.js";
import { generateKeyString } from "../../src/shared/protocol/crypticle.js";
import { testKeys } from "../helpers/minions.js";
import { configureLogging } from "../../src/shared/log.js";
import { jobReturnsChannel, serveReturnWatches } from "../../src/shared/job-return-watch.js";
import type { WireValue } from "../../src/shared/protocol/msgpack.js";

let ctx: MasterContext;
let root: string;
let outside: string;
let stopWatches: () => void;

before(async () => {
  configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });
  root = mkdtempSync(path.join(os.tmpdir(), "brine-pfz-"));
  const cfg = {
    ...masterDefaults(),
    id: "m",
    pki_dir: path.join(root, "pki"),
    cachedir: path.join(root, "cache"),
    sock_dir: path.join(root, "sock"),
    peer: { ".*": [".*"] },
    file_recv: true,
    file_recv_max_size: 1,
    timeout: 0.001,
  };
  mkdirSync(cfg.cachedir, { recursive: true });
  const store = new KeyStore(cfg.pki_dir);
  store.ensureDirs();
  loadOrCreateKeyPair(cfg.pki_dir, "master", 2048);
  const keys = (await testKeys(2))[0]!;
  store.write("accepted", "fz", keys.publicPem);
  store.write("accepted", "other", keys.publicPem);
  ensureRootKey(cfg.cachedir, cfg.user);
  const secrets = new SharedSecrets();
  secrets.setAesKey(generateKeyString());
  ctx = new MasterContext(cfg, { secrets: secrets.sab, nonces: new NonceSet(1 << 12).sab, jids: new SharedArrayBuffer(8) });
  // the main thread's side of a minion_publish's return watch, as the master runs it (src/main.ts), on a bus that
  // carries nothing: without it every minion_publish that reached the watch waited watchAnswerTimeoutMs (5 s) for
  // a confirmation no thread sends, which made this file's duration 6 to 50 s as the loads drawn fell
  const watchChannel = jobReturnsChannel(ctx.cfg);
  const stop = serveReturnWatches(watchChannel, () => () => undefined);
  stopWatches = () => {
    stop();
    watchChannel.close();
  };
  // a symlink planted in the minion's directory, pointing outside it: never followed
  outside = path.join(root, "outside");
  mkdirSync(outside);
  mkdirSync(path.join(cfg.cachedir, "minions", "fz", "files"), { recursive: true });
  symlinkSync(outside, path.join(cfg.cachedir, "minions", "fz", "files", "ln"));
});
after(async () => {
  stopWatches();
  await ctx.store.close();
  rmSync(root, { recursive: true, force: true });
});

const segment = fc.oneof(fc.constantFrom("..", ".", "", "/", "a", "b", "ln", "../..", "a/../../..", "/etc", "x\0y", "x".repeat(300), "é".repeat(130), "\n"), fc.string({ maxLength: 8 }));
const scalar = fc.oneof(fc.string({ maxLength: 12 }), fc.integer(), fc.boolean(), fc.constant(null), fc.uint8Array({ maxLength: 16 }));
const anyValue = fc.oneof(scalar, fc.array(scalar, { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 6 }), scalar, { maxKeys: 3 }));

const fileRecv = fc.record(
  {
    cmd: fc.constant("_file_recv"),
    id: fc.constant("fz"),
    tok: fc.constant("t"),
    // weighted toward loads that reach the write, so every run exercises the disk checks too
    path: fc.oneof({ weight: 3, arbitrary: fc.array(fc.constantFrom("a", "b", "c.txt"), { minLength: 1, maxLength: 3 }) }, { weight: 4, arbitrary: fc.array(segment, { maxLength: 5 }) }, { weight: 1, arbitrary: anyValue }),
    loc: fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.integer({ min: -2, max: 2 * 1024 * 1024 }) }, { weight: 1, arbitrary: fc.constantFrom(1, 1048575, 1048576) }, { weight: 1, arbitrary: anyValue }),
    data: fc.oneof({ weight: 4, arbitrary: fc.uint8Array({ maxLength: 64 }) }, { weight: 1, arbitrary: fc.string({ maxLength: 16 }) }, { weight: 1, arbitrary: anyValue }),
  },
  { requiredKeys: ["cmd", "id", "tok", "path", "loc", "data"] },
);
/** weighted: mostly `good`, sometimes anything */
const mostly = <T>(good: fc.Arbitrary<T>, other: fc.Arbitrary<unknown>) => fc.oneof({ weight: 3, arbitrary: good as fc.Arbitrary<unknown> }, { weight: 1, arbitrary: other });
const peerPub = fc.record(
  {
    cmd: fc.constantFrom("minion_pub", "minion_pub", "minion_publish", "pub_ret", "minion_runner"),
    id: fc.constantFrom("fz", "fz", "other", "../x", ""),
    tok: fc.constant("t"),
    fun: mostly(fc.constantFrom("test.ping", "test.echo", "publish.publish", "test.ping,test.echo", "cmd.run", ""), anyValue),
    arg: mostly(fc.array(fc.oneof(fc.string({ maxLength: 8 }), fc.constant("k=v")), { maxLength: 3 }), anyValue),
    tgt: mostly(fc.constantFrom("fz", "*", "other", "(a+)+$", "G@os:x or fz", "nosuch"), anyValue),
    tgt_type: mostly(fc.constantFrom("glob", "pcre", "list", "compound", "pillar", "nodegroup", "grain"), anyValue),
    ret: mostly(fc.constant(""), anyValue),
    // a minion_publish waits for its returns up to its tmo (at most 300 s) and nothing returns here: only tmo
    // values that wait no whole second (a random positive integer once held this file to its 5-minute timeout)
    tmo: fc.oneof(fc.constantFrom(0, "0", "x", -5, "-3", 0.4), anyValue.filter((v) => typeof v !== "number" && !(typeof v === "string" && /^\s*-?\d+\s*$/.test(v)))),
    jid: fc.oneof(fc.constantFrom("20261125120000000000", "../../etc/passwd"), anyValue),
    form: fc.constantFrom("clean", "full"),
  },
  { requiredKeys: ["cmd", "id", "tok", "fun", "arg", "tgt", "ret"] },
);

async function run(load: Record<string, unknown>): Promise<unknown> {
  const h = AES_FUNCS.get(load.cmd as string)!;
  const r = await h(ctx, load as Record<string, WireValue>, newEffects());
  assert.equal(r.mode, "send");
  return r.ret;
}

/** Every file under `dir`, relative. */
function files(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) if (!e.isDirectory()) out.push(path.relative(dir, path.join(e.parentPath, e.name)));
  return out;
}

test("random _file_recv loads answer True or False and write only under cachedir/minions/fz/files", async () => {
  let written = 0;
  await fc.assert(
    fc.asyncProperty(fileRecv, async (l) => {
      const r = await run(l);
      assert.ok(r === true || r === false, JSON.stringify(r));
      if (r === true) written++;
    }),
    { numRuns: 400 },
  );
  assert.ok(written > 0, "some pushes were written (the property reached the writes)");
  assert.deepEqual(files(outside), [], "nothing through the planted symlink");
  assert.deepEqual(readdirSync(path.join(ctx.cfg.cachedir, "minions")), ["fz"]);
  assert.deepEqual(readdirSync(root).sort(), ["cache", "outside", "pki"]);
});

test("random peer loads answer a map and never throw", async () => {
  let published = 0;
  await fc.assert(
    fc.asyncProperty(peerPub, async (l) => {
      const r = await run(l);
      assert.ok(r === null || (typeof r === "object" && !Array.isArray(r)), JSON.stringify(r));
      if (r && typeof r === "object" && "jid" in r) published++;
    }),
    { numRuns: 300 },
  );
  assert.ok(published > 0, "some peer jobs were published (the property reached the publish path)");
});
