/**
 * Issues 19 and 20 with brine's test minion speaking as Salt's publish and cp modules do (3007 v3 and 3006.8
 * v2 channels): a minion pings another through `publish.publish` (the job is a CLI job: same events, job
 * cache, `id` of the asking minion in the publish), `publish.full_data`, `publish.runner` through a runner
 * thread; refusals answer Salt's `{}`; `pub_ret` answers only the publishing minion. `cp.push`: a file lands
 * in chunks under cachedir/minions/<id>/files; `..`, absolute paths, symlinks on the way, a chunk past the end
 * and a file over file_recv_max_size are refused with False; with file_recv off every push is refused.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

const MiB = 1024 * 1024;

describe("peer publish and file pushes", { timeout: 240_000 }, () => {
  let tm: TestMaster;
  let conf: string;
  let ec: EventClient;
  let k: MinionKeys[];
  const events: BusEvent[] = [];
  let a1: TestMinion, a2: TestMinion, b1: TestMinion;

  before(async () => {
    tm = await startTestMaster({
      auto_accept: true,
      peer: { "a1": ["test.*"], "b.*": ["test.ping"] },
      peer_run: { "a1": ["test\\.arg", "test\\.sleep", "test\\.nosuch"] },
      file_recv: true,
      file_recv_max_size: 1,
    });
    conf = writeConfigDir(tm);
    ec = new EventClient(tm.sockDir);
    await ec.connect();
    ec.on((e) => events.push(e));
    k = await testKeys(3);
    a1 = fastMinion(tm, "a1", k[0]!);
    a2 = fastMinion(tm, "a2", k[1]!);
    b1 = fastMinion(tm, "b1", k[2]!, { protocol: "v2" });
    await Promise.all([a1, a2, b1].map((m) => m.start()));
  });
  after(async () => {
    ec?.close();
    for (const m of [a1, a2, b1]) await m?.stop();
    await tm?.stop();
  });

  test("publish.publish: a1 pings a2; the job is a CLI job with a1's id in its publish", async () => {
    assert.deepEqual(await a1.peerPublish("a2", "test.ping"), { a2: true });
    const pub = events.find((e) => e.tag.endsWith("/publish") && e.data.id === "a1" && e.data.fun === "test.ping");
    assert.ok(pub, "salt/job/<jid>/publish with id a1");
    const jid = pub.data.jid as string;
    assert.deepEqual({ ...pub.data, _stamp: undefined }, { fun: "test.ping", arg: [], tgt: "a2", jid, ret: "", id: "a1", tgt_type: "glob", user: tm.cfg.user, _stamp: undefined });
    // the new event names the publishing minion: clustered, peers store the load from it (pub_ret works on any master)
    assert.ok(events.some((e) => e.tag === `salt/job/${jid}/new` && (e.data.minions as string[]).join() === "a2" && e.data.id === "a1"));
    const r = await runCli("salt-run", ["-c", conf, "jobs.list_job", jid, "--out", "json"]);
    const job = JSON.parse(r.stdout);
    assert.equal(job.Function, "test.ping");
    assert.equal(job.User, tm.cfg.user);
    assert.deepEqual(Object.keys(job.Result), ["a2"]);
  });

  test("publish.publish with arguments (key=value parsed as Salt does), a glob, and tgt_type", async () => {
    assert.deepEqual(await a1.peerPublish("a*", "test.echo", ["hello"]), { a1: "hello", a2: "hello" });
    const arg = (await a1.peerPublish("b1", "test.arg", ["1", "x=[1, 2]"])) as Record<string, { args: unknown[]; kwargs: Record<string, unknown> }>;
    assert.deepEqual(arg.b1!.args, [1]);
    assert.deepEqual(arg.b1!.kwargs.x, [1, 2]);
    assert.deepEqual(await a1.peerPublish("a2,b1", "test.ping", [], { tgtType: "list" }), { a2: true, b1: true });
    assert.deepEqual(await a1.peerPublish("G@id:a2", "test.ping", [], { tgtType: "compound" }), { a2: true });
    // a target that matches nothing: the master answers {jid: None, minions: []} and the module returns None
    assert.equal(await a1.peerPublish("nosuch*", "test.ping"), null);
  });

  test("publish.full_data answers each return as {ret}; a 3006.8 (v2) minion publishes too", async () => {
    assert.deepEqual(await a1.peerPublish("a2", "test.ping", [], { form: "full" }), { a2: { ret: true } });
    assert.deepEqual(await b1.peerPublish("a1", "test.ping"), { a1: true });
  });

  test("refusals are Salt's {} and publish nothing: function not allowed, minion without rights, publish.*", async () => {
    const before = events.filter((e) => e.tag.endsWith("/new")).length;
    assert.deepEqual(await a2.peerPublish("a1", "test.ping"), {});
    assert.deepEqual(await b1.peerPublish("a1", "test.echo", ["x"]), {});
    assert.deepEqual(await a1.peerPublish("a2", "cmd.run", ["id"]), {});
    // what Salt's module would never send (it refuses publish.* itself): the master refuses it too
    assert.deepEqual(await a1.channel.send({ cmd: "minion_pub", fun: "publish.publish", arg: ["a2", "test.ping"], tgt: "a2", tgt_type: "glob", ret: "", id: "a1" }, a1.requestOptions), {});
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(events.filter((e) => e.tag.endsWith("/new")).length, before);
  });

  test("pub_ret answers only the minion that published the job", async () => {
    const pub = (await a1.channel.send({ cmd: "minion_pub", fun: "test.ping", arg: [], tgt: "a2", tgt_type: "glob", ret: "", id: "a1" }, a1.requestOptions)) as { jid: string; minions: string[] };
    assert.deepEqual(pub.minions, ["a2"]);
    let mine: unknown = {};
    for (let i = 0; i < 50 && Object.keys(mine as object).length === 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      mine = await a1.channel.send({ cmd: "pub_ret", id: "a1", jid: pub.jid }, a1.requestOptions);
    }
    assert.deepEqual(mine, { a2: { ret: true } });
    assert.deepEqual(await a2.channel.send({ cmd: "pub_ret", id: "a2", jid: pub.jid }, a2.requestOptions), {});
    assert.deepEqual(await a1.channel.send({ cmd: "pub_ret", id: "a1", jid: "../../etc/passwd" }, a1.requestOptions), {});
  });

  test("minion_publish (the older form) waits on the master and answers the returns", async () => {
    const r = await a1.channel.send({ cmd: "minion_publish", fun: "test.echo", arg: ["hi"], tgt: "a2,b1", tgt_type: "list", ret: "", tmo: 10, id: "a1" }, a1.requestOptions);
    assert.deepEqual(r, { a2: "hi", b1: "hi" });
    const full = (await a1.channel.send({ cmd: "minion_publish", fun: "test.ping", arg: [], tgt: "a2", ret: "", tmo: 10, form: "full", id: "a1" }, a1.requestOptions)) as Record<string, unknown>;
    assert.equal((full.a2 as { ret: unknown }).ret, true);
    assert.match(String(full.__jid__), /^\d{20}$/);
  });

  test("publish.runner runs the runner in a runner thread and answers its return; others get {}", async () => {
    assert.deepEqual(await a1.peerRunner("test.arg", ["1", "word", "k=v"]), { args: [1, "word"], kwargs: { k: "v" } });
    // the caller is answered once the runner's result is encoded; salt/run/<jid>/ret follows when its job record is committed
    const isRet = (e: { tag: string; data: Record<string, unknown> }) => /^salt\/run\/\d{20}\/ret$/.test(e.tag) && e.data.fun === "runner.test.arg";
    for (const until = Date.now() + 10_000; !events.some(isRet) && Date.now() < until; ) await new Promise((r) => setTimeout(r, 50));
    assert.ok(events.some(isRet), "salt/run/<jid>/ret of the peer runner");
    assert.deepEqual(await a2.peerRunner("test.arg", ["1"]), {});
    assert.deepEqual(await a1.peerRunner("manage.up"), {});
    // an allowed name that is no runner: {} as Salt's
    assert.deepEqual(await a1.peerRunner("test.nosuch"), {});
    // a runner that fails answers its message
    const bad = await a1.peerRunner("test.sleep", ["s_time=-1"]);
    assert.match(String(bad), /^Exception occurred in runner test\.sleep: .*s_time must be a number/);
  });

  const files = () => path.join(tm.cachedir, "minions");

  test("cp.push: a 600 KB file lands in 3 chunks under cachedir/minions/<id>/files/<path>; an empty file too", async () => {
    const data = randomBytes(600_000);
    assert.equal(await a1.push(["tmp", "peer cmp", "mid.bin"], data), true);
    assert.ok(readFileSync(path.join(files(), "a1", "files", "tmp", "peer cmp", "mid.bin")).equals(data));
    assert.equal(await b1.push(["etc", "empty"], Buffer.alloc(0)), true);
    assert.equal(readFileSync(path.join(files(), "b1", "files", "etc", "empty")).length, 0);
    // pushed again, shorter: the first chunk truncates
    assert.equal(await a1.push(["tmp", "peer cmp", "mid.bin"], Buffer.from("short")), true);
    assert.equal(readFileSync(path.join(files(), "a1", "files", "tmp", "peer cmp", "mid.bin"), "utf8"), "short");
  });

  test("cp.push refusals answer False: '..', absolute, NUL, a symlink on the way, a chunk past the end", async () => {
    const escape = path.join(tm.root, "escaped");
    assert.equal(await a1.push(["..", "..", "escaped"], Buffer.from("x")), false);
    assert.equal(await a1.push(["a", "../../../escaped"], Buffer.from("x")), false);
    assert.equal(await a1.push(["", "tmp", "abs"], Buffer.from("x")), false);
    assert.equal(await a1.push(["nul\0.txt"], Buffer.from("x")), false);
    assert.equal(existsSync(escape), false);
    // a symlink inside the minion's directory (planted by someone on the master) is never followed
    mkdirSync(escape);
    symlinkSync(escape, path.join(files(), "a1", "files", "link"));
    assert.equal(await a1.push(["link", "x"], Buffer.from("x")), false);
    writeFileSync(path.join(escape, "target"), "keep");
    symlinkSync(path.join(escape, "target"), path.join(files(), "a1", "files", "filelink"));
    assert.equal(await a1.push(["filelink"], Buffer.from("x")), false);
    assert.equal(readFileSync(path.join(escape, "target"), "utf8"), "keep");
    assert.equal(existsSync(path.join(escape, "x")), false);
    // a chunk whose first chunk never came
    assert.equal(await a1.channel.send({ cmd: "_file_recv", id: "a1", path: ["gap"], loc: 10, data: Buffer.from("x") }, a1.requestOptions), false);
    assert.equal(await a1.channel.send({ cmd: "_file_recv", id: "a1", path: ["neg"], loc: -1, data: Buffer.from("x") }, a1.requestOptions), false);
  });

  test("cp.push of a file over file_recv_max_size (1 MiB) answers False at the chunk that passes it; its part is removed", async () => {
    assert.equal(await a1.push(["big.bin"], randomBytes(2 * MiB)), false);
    assert.equal(existsSync(path.join(files(), "a1", "files", "big.bin")), false);
    assert.equal(await a1.push(["exact.bin"], randomBytes(MiB)), true);
  });

  test("with file_recv off (Salt's default) every push answers False and writes nothing", async () => {
    const off = await startTestMaster({ auto_accept: true });
    const m = fastMinion(off, "c1", k[0]!);
    try {
      await m.start();
      assert.equal(await m.push(["etc", "fstab"], Buffer.from("x")), false);
      assert.equal(existsSync(path.join(off.cachedir, "minions", "c1")), false);
      // and peer publish is off without peer:
      assert.deepEqual(await m.peerPublish("c1", "test.ping"), {});
    } finally {
      await m.stop();
      await off.stop();
    }
  });
});
