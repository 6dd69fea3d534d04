/**
 * Key pool, coarse timer, execution functions and the `_return` load.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { x931Recover } from "../../src/shared/protocol/x931.js";
import { ensureKeyPool, keyPool, loadKeySlot, slotPaths } from "../../src/lib/minion/keys.js";
import { CoarseTimer } from "../../src/shared/coarse-timer.js";
import { FunctionRunner, returnLoad, saltStamp, splitArgs, type PublishLoad } from "../../src/lib/minion/functions.js";
import { packSalt } from "../../src/lib/minion/wire.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";
import { chosen } from "../helpers/fixtures.js";

describe("key pool", () => {
  test("generated once in Salt's formats, reused on the next call, grown on demand", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "brine-keys-"));
    try {
      const a = await keyPool(3, { dir });
      assert.equal(a.info.generated, 3);
      assert.equal(a.info.reused, 0);
      const p = slotPaths(dir, 1);
      assert.match(readFileSync(p.pem, "utf8"), /^-----BEGIN RSA PRIVATE KEY-----\n/);
      assert.match(readFileSync(p.pub, "utf8"), /^-----BEGIN PUBLIC KEY-----\n[\s\S]+-----END PUBLIC KEY-----\n$/);
      assert.equal(statSync(p.pem).mode & 0o777, 0o600);
      assert.equal(x931Recover(a.keys[0]!.publicKey, a.keys[0]!.tok).toString(), "salt");
      assert.equal(a.keys[0]!.publicKey.asymmetricKeyDetails?.modulusLength, 2048);

      const b = await keyPool(3, { dir });
      assert.equal(b.info.generated, 0);
      assert.equal(b.info.reused, 3);
      assert.deepEqual(b.keys.map((k) => k.pub), a.keys.map((k) => k.pub));

      const c = await ensureKeyPool(4, { dir });
      assert.equal(c.generated, 1);
      assert.equal(c.reused, 3);

      // the tok is cached beside the key and reused only while it verifies
      assert.deepEqual(readFileSync(p.tok), b.keys[1]!.tok);
      writeFileSync(p.tok, Buffer.alloc(256, 7));
      assert.equal(x931Recover(loadKeySlot(dir, 1).publicKey, loadKeySlot(dir, 1).tok).toString(), "salt");
      // a .pub that disagrees with its .pem is repaired from the private key
      writeFileSync(p.pub, "junk");
      assert.equal(loadKeySlot(dir, 1).pub, a.keys[1]!.pub);
      assert.match(readFileSync(p.pub, "utf8"), /BEGIN PUBLIC KEY/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("coarse timer", () => {
  test("fires due callbacks in one interval, cancels, and stops when idle", async () => {
    const t = new CoarseTimer(5);
    const fired: number[] = [];
    t.after(10, () => fired.push(1));
    const h = t.after(10, () => fired.push(2));
    t.after(30, () => fired.push(3));
    h.cancel();
    assert.equal(t.pending, 2);
    await t.sleep(60);
    assert.deepEqual(fired, [1, 3]);
    assert.equal(t.pending, 0);
    const ac = new AbortController();
    const p = t.sleep(10_000, ac.signal);
    ac.abort(new Error("stop"));
    await assert.rejects(p, /stop/);
    assert.equal(t.pending, 0);
  });
});

describe("execution functions", () => {
  const self = { id: "m1", grains: { os: "Debian", roles: ["web"] }, pillar: { a: 1 }, version: "3007.8" };
  const job = (fun: string | string[], arg: unknown[] = [], jid = "20260101000000000001"): PublishLoad =>
    ({ fun, arg, jid, tgt: "*", tgt_type: "glob", ret: "", user: "root" }) as PublishLoad;

  test("argument parsing follows load_args_and_kwargs", () => {
    assert.deepEqual(splitArgs(["a", "n=5", "x==y", { __kwarg__: true, k: "v" }, 3]), { args: ["a", "x==y", 3], kwargs: { n: 5, k: "v" } });
  });

  test("test.* / grains / cmd.run / unknown functions", async () => {
    const r = new FunctionRunner(self, { timer: new CoarseTimer(5) });
    assert.deepEqual(await r.run(job("test.ping")), { return: true, retcode: 0, success: true, out: undefined });
    assert.equal((await r.run(job("test.echo", ["hi"]))).return, "hi");
    assert.deepEqual((await r.run(job("test.arg", ["a", "b=2", { __kwarg__: true, __pub_x: 1, c: 3 }]))).return, { args: ["a"], kwargs: { b: 2, c: 3 } });
    assert.equal((await r.run(job("test.version"))).return, "3007.8");
    assert.deepEqual((await r.run(job("grains.items"))).return, self.grains);
    assert.equal((await r.run(job("cmd.run", ["echo hi"]))).return, "hi");
    const nf = await r.run(job("cmd.run", ["frobnicate"]));
    assert.equal(nf.retcode, 127);
    assert.equal(nf.success, false);
    const miss = await r.run(job("no.such"));
    assert.deepEqual(miss, { return: "'no.such' is not available.", retcode: 1, success: false, out: "nested" });
    const multi = await r.run(job(["test.ping", "test.echo"], [[], ["x"]]));
    assert.deepEqual(multi.return, { "test.ping": true, "test.echo": "x" });
  });

  test("saltutil.find_job sees a running test.sleep, then {}", async () => {
    const r = new FunctionRunner(self, { timer: new CoarseTimer(5) });
    const sleeping = r.run(job("test.sleep", ["0.2"], "20260101000000000007"));
    const found = await r.run(job("saltutil.find_job", ["20260101000000000007"], "20260101000000000008"));
    assert.deepEqual(Object.keys(found.return as object).sort(), ["arg", "fun", "jid", "pid", "ret", "tgt", "tgt_type", "user"]);
    assert.equal((found.return as { fun: string }).fun, "test.sleep");
    assert.equal((await sleeping).return, true);
    assert.deepEqual((await r.run(job("saltutil.find_job", ["20260101000000000007"]))).return, {});
  });

  test("state.apply runs the test.* states of the SLS the master serves, and says so when an SLS is missing, templated or uses another module", async () => {
    const files: Record<string, string> = {
      "web.sls": "short:\n  test.succeed_without_changes\nlong:\n  test.succeed_with_changes:\n    - name: named\n",
      "app/init.sls": "listed:\n  test:\n    - fail_without_changes\n    - comment: nope\n",
      "pkgs.sls": "vim:\n  pkg.installed\n",
      "tpl.sls": "{% set x = 1 %}\nx:\n  test.nop\n",
    };
    const fetched: string[] = [];
    const r = new FunctionRunner(self, { timer: new CoarseTimer(5), masterFile: async (p, env) => (fetched.push(`${env}:${p}`), files[p] === undefined ? undefined : Buffer.from(files[p]!)) });
    const web = await r.run(job("state.apply", ["web"]));
    assert.equal(web.retcode, 0);
    const ret = web.return as Record<string, { result: boolean; name: string; changes: object; __run_num__: number; __sls__: string }>;
    assert.deepEqual(Object.keys(ret), ["test_|-short_|-short_|-succeed_without_changes", "test_|-long_|-named_|-succeed_with_changes"]);
    assert.equal(ret["test_|-long_|-named_|-succeed_with_changes"]!.__run_num__, 1);
    assert.deepEqual(ret["test_|-short_|-short_|-succeed_without_changes"]!.changes, {});
    const app = await r.run(job("state.apply", ["app", { __kwarg__: true, saltenv: "dev" }]));
    assert.equal(app.retcode, 2, "a failed state gives Salt's EX_STATE_FAILURE");
    assert.deepEqual(fetched.slice(-2), ["dev:app.sls", "dev:app/init.sls"], "a.b is a/b.sls, else a/b/init.sls");
    assert.equal((app.return as Record<string, { comment: string }>)["test_|-listed_|-listed_|-fail_without_changes"]!.comment, "nope");
    const pkgs = await r.run(job("state.apply", ["pkgs"]));
    assert.equal(pkgs.retcode, 2);
    assert.match((pkgs.return as Record<string, { comment: string }>)["pkg_|-vim_|-vim_|-installed"]!.comment, /State 'pkg\.installed' was not found in SLS 'pkgs'.*test\.\* states only/);
    assert.deepEqual(await r.run(job("state.apply", ["nowhere"])), { return: ["No matching sls found for 'nowhere' in env 'base'"], retcode: 1, success: false, out: "highstate" });
    assert.match(((await r.run(job("state.apply", ["tpl"]))).return as string[])[0]!, /plain YAML only/);
    assert.match(String((await r.run(job("state.apply"))).return), /without mods .* not implemented/);
    assert.equal((await new FunctionRunner(self).run(job("state.apply", ["web"]))).return, "'state.apply' is not available.", "without a master to read from");
  });

  test("_return load has a real minion's fields in its order", () => {
    for (const gen of ["v3-3007", "v2-3006"] as const) {
      const cap = chosen(gen, "return-request").decoded!;
      const inner = Object.values(cap).find((v: any) => v && v.cmd === "_return") as Record<string, unknown>;
      const ours = returnLoad("m1", job("test.ping"), { return: true, retcode: 0, success: true });
      const capKeys = Object.keys(inner).filter((k) => !["nonce", "ts", "tok"].includes(k));
      assert.deepEqual(Object.keys(ours), capKeys, gen);
    }
    assert.match(saltStamp(Date.UTC(2026, 10, 21, 15, 54, 4, 342)), /^2026-11-21T15:54:04\.342000$/);
  });

  test("packSalt writes the old msgpack spec (str16 for 32+ bytes, no bin, no str8)", () => {
    const b = packSalt({ s: "x".repeat(40), b: Buffer.alloc(3, 0xff), n: -1, big: 2 ** 40, f: 1.5 });
    assert.equal(b.indexOf(0xd9), -1);
    assert.equal(b.indexOf(0xc4), -1);
    assert.equal(b[3], 0xda);
    const back = decodeWire(b) as Record<string, unknown>;
    assert.deepEqual(back, { s: "x".repeat(40), b: Buffer.alloc(3, 0xff), n: -1, big: 2 ** 40, f: 1.5 });
  });
});
