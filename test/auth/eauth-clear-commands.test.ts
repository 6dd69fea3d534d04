/**
 * The clear commands salt-api, Pepper and CI pipelines send (publish, runner, wheel, mk_token,
 * get_token), through a real master's request port: a request that carries `eauth` or `token` is
 * judged by those alone, never by the root key that salt-api sends with it; a refusal gets the Python
 * master's answer, nothing is published or run, and one audit line is logged.
 *
 * Before this, brine authorised every publish by the root key alone: the first test here published
 * `cmd.run` for user "nobody" with a wrong password.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { isMap, type WireValue } from "../../src/shared/protocol/msgpack.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys, waitForEvent } from "../helpers/minions.js";

const SECRET = "s3cret-shared-secret-for-tests";
const AUTHN = { name: "AuthenticationError", message: "Authentication error occurred." };
const AUTHZ = { name: "AuthorizationError", message: "Authorization error occurred." };

describe("eauth on the clear commands", { timeout: 300_000 }, () => {
  let tm: TestMaster;
  let web: TestMinion;
  let db: TestMinion;
  let raw: RawClient;
  let bus: EventClient;
  const seen: BusEvent[] = [];
  let logFile: string;

  async function assertLogged(re: RegExp): Promise<void> {
    for (let i = 0; i < 60; i++) {
      if (re.test(readFileSync(logFile, "utf8"))) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(`no log line matching ${re}`);
  }

  before(async () => {
    logFile = path.join(os.tmpdir(), `brine-eauth-${process.pid}.log`);
    tm = await startTestMaster(
      {
        auto_accept: true,
        sharedsecret: SECRET,
        external_auth: {
          sharedsecret: {
            ops: [".*", "@runner", "@wheel"],
            webadmin: [{ "web*": ["test.*", { "cmd.run": { args: ["uptime"] } }] }],
            jobsonly: ["@jobs"],
            "dev%": ["test.ping"],
          },
        },
        token_expire: 3600,
        token_expire_user_override: true,
        publisher_acl: { fred: ["test.ping"] },
        sudo_acl: true,
      },
      undefined,
      { logFile },
    );
    const k = await testKeys(2);
    web = fastMinion(tm, "web1", k[0]!);
    db = fastMinion(tm, "db1", k[1]!);
    await web.start();
    await db.start();
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 10_000 });
    bus = new EventClient(tm.sockDir);
    await bus.connect();
    bus.on((e) => seen.push(e));
  });
  after(async () => {
    bus.close();
    raw.close();
    await web.stop();
    await db.stop();
    await tm.stop();
    rmSync(logFile, { force: true });
  });

  /** salt-api's LocalClient load: the root key beside the user's eauth credentials in kwargs. */
  const apiPublish = (kwargs: Record<string, unknown>, over: Record<string, unknown> = {}) =>
    raw.clear({ cmd: "publish", tgt: "*", fun: "cmd.run", arg: ["id"], tgt_type: "glob", ret: "", jid: "", user: "salt-api", key: tm.rootKey, kwargs: { show_jid: false, ...kwargs }, ...over });
  const creds = (username: string, password = SECRET) => ({ eauth: "sharedsecret", username, password });
  const newJobs = () => seen.filter((e) => /^salt\/job\/\d+\/new$/.test(e.tag));
  const map = (v: WireValue) => {
    assert.ok(isMap(v), `a map, got ${JSON.stringify(v)}`);
    return v as Record<string, any>;
  };

  test("a publish with the root key and a wrong eauth password is refused: nothing published (the hole this closes)", async () => {
    const before = newJobs().length;
    const r = map(await apiPublish(creds("nobody", "wrong")));
    assert.deepEqual(r.error, AUTHN);
    assert.equal(r.load, undefined);
    await new Promise((res) => setTimeout(res, 300));
    assert.equal(newJobs().length, before, "no job was announced");
    await assertLogged(/audit: user="nobody" backend="sharedsecret" fun="cmd.run" target="\*" source="request port" verdict="denied: bad credentials"/);
  });

  test("a publish with a token that is unknown, malformed or missing its eauth is refused", async () => {
    for (const token of ["0".repeat(64), "not hex", 12]) {
      assert.deepEqual(map(await apiPublish({ token })).error, AUTHN);
    }
    assert.deepEqual(map(await apiPublish({ eauth: "sharedsecret" })).error, AUTHN);
    assert.deepEqual(map(await apiPublish({ eauth: "pam", username: "ops", password: SECRET })).error, AUTHN, "a backend external_auth does not enable");
  });

  test("an authenticated user runs what the auth list allows, and the saved job keeps no password", async () => {
    const got = waitForEvent(web, "return", (x) => x.fun === "test.ping", 10_000);
    const r = map(await apiPublish(creds("webadmin"), { fun: "test.ping", arg: [], tgt: "web1" }));
    assert.ok(isMap(r.load), JSON.stringify(r));
    assert.deepEqual(r.load.minions, ["web1"]);
    await got;
    const jid = String(r.load.jid);
    const ev = seen.find((e) => e.tag === `salt/job/${jid}/new`);
    assert.equal((ev?.data as Record<string, unknown>).user, "webadmin", "the job runs as the eauth user, not salt-api's");
    const store = openStore(tm.cfg);
    try {
      const saved = store.loads.get(jid) as Record<string, any>;
      assert.equal(saved.user, "webadmin");
      assert.equal(saved.key, undefined);
      assert.equal(saved.kwargs.password, undefined);
      assert.equal(saved.kwargs.username, undefined);
    } finally {
      await store.close();
    }
  });

  test("a valid user outside the auth list gets AuthorizationError: a minion outside the target, a function or argument not allowed", async () => {
    const before = newJobs().length;
    assert.deepEqual(map(await apiPublish(creds("webadmin"), { fun: "test.ping", arg: [], tgt: "*" })).error, AUTHZ, "db1 is not web*");
    assert.deepEqual(map(await apiPublish(creds("webadmin"), { fun: "cmd.run", arg: ["rm -rf /"], tgt: "web1" })).error, AUTHZ);
    assert.deepEqual(map(await apiPublish(creds("webadmin"), { fun: "cmd.run", arg: ["uptime; rm -rf /"], tgt: "web1" })).error, AUTHZ, "Salt's prefix match would allow this");
    assert.deepEqual(map(await apiPublish(creds("webadmin"), { fun: "pkg.install", arg: ["x"], tgt: "web1" })).error, AUTHZ);
    assert.deepEqual(map(await apiPublish(creds("stranger"), { fun: "test.ping", arg: [], tgt: "web1" })).error, AUTHZ, "authenticated, empty auth list");
    assert.equal(newJobs().length, before);
    const ok = map(await apiPublish(creds("webadmin"), { fun: "cmd.run", arg: ["uptime"], tgt: "web1" }));
    assert.deepEqual(ok.load?.minions, ["web1"]);
  });

  test("runner: refused without the right, with Salt's error names; allowed runners answer a jid and the return comes on the bus", async () => {
    const bad = map(await raw.clear({ cmd: "runner", fun: "jobs.list_jobs", kwarg: {}, ...creds("ops", "wrong") }));
    assert.deepEqual(bad.error, { name: "EauthAuthenticationError", message: 'Authentication failure of type "eauth" occurred for user ops.' });
    const noRight = map(await raw.clear({ cmd: "runner", fun: "manage.up", kwarg: {}, ...creds("jobsonly") }));
    assert.deepEqual(noRight.error, { name: "EauthAuthenticationError", message: 'Authentication failure of type "eauth" occurred for user jobsonly.' });
    const noKey = map(await raw.clear({ cmd: "runner", fun: "manage.up", kwarg: {} }));
    assert.equal(noKey.error.name, "UserAuthenticationError");
    const badSyntax = map(await raw.clear({ cmd: "runner", fun: "nodot", kwarg: {}, ...creds("ops") }));
    assert.equal(badSyntax.error.name, "SaltInvocationError");
    assert.equal(seen.filter((e) => e.tag.startsWith("salt/run/")).length, 0, "nothing ran");

    const r = map(await raw.clear({ cmd: "runner", fun: "jobs.list_jobs", kwarg: {}, ...creds("jobsonly") }));
    assert.match(String(r.jid), /^\d{20}$/);
    assert.equal(r.tag, `salt/run/${r.jid}`);
    for (let i = 0; i < 200 && !seen.some((e) => e.tag === `salt/run/${r.jid}/ret`); i++) await new Promise((res) => setTimeout(res, 50));
    const ret = seen.find((e) => e.tag === `salt/run/${r.jid}/ret`)?.data as Record<string, unknown> | undefined;
    assert.ok(ret, "the runner's return reached the bus");
    assert.equal(ret.success, true);
    assert.equal(ret.user, "jobsonly");
    assert.equal(ret.fun, "runner.jobs.list_jobs");
  });

  test("wheel: refused without the right; allowed calls answer {tag, data} with the return", async () => {
    const bad = map(await raw.clear({ cmd: "wheel", fun: "key.list_all", token: "f".repeat(64) }));
    assert.deepEqual(bad.error, { name: "TokenAuthenticationError", message: 'Authentication failure of type "token" occurred.' });
    const noRight = map(await raw.clear({ cmd: "wheel", fun: "key.list_all", ...creds("webadmin") }));
    assert.equal(noRight.error.name, "EauthAuthenticationError");
    const r = map(await raw.clear({ cmd: "wheel", fun: "key.list_all", ...creds("ops") }));
    assert.match(String(r.tag), /^salt\/wheel\/\d{20}$/);
    assert.equal(r.data.fun, "wheel.key.list_all");
    assert.equal(r.data.user, "ops");
    assert.equal(r.data.success, true);
  });

  test("mk_token: a failed login gets \"\"; a token names its user and works for publish until revoked", async () => {
    assert.equal(await raw.clear({ cmd: "mk_token", ...creds("ops", "wrong") }), "");
    assert.equal(await raw.clear({ cmd: "mk_token", eauth: "nosuch", username: "ops", password: SECRET }), "");
    const tok = map(await raw.clear({ cmd: "mk_token", ...creds("webadmin") }));
    assert.match(String(tok.token), /^[0-9a-f]{64}$/);
    assert.equal(tok.name, "webadmin");
    assert.equal(tok.eauth, "sharedsecret");
    assert.ok(tok.expire - tok.start > 3599 && tok.expire - tok.start <= 3600);

    const got = map(await raw.clear({ cmd: "get_token", token: tok.token }));
    assert.equal(got.name, "webadmin");
    assert.deepEqual(await raw.clear({ cmd: "get_token", token: "a".repeat(64) }), {});
    assert.equal(await raw.clear({ cmd: "get_token" }), false);

    const pub = map(await apiPublish({ token: tok.token }, { fun: "test.ping", arg: [], tgt: "web1" }));
    assert.deepEqual(pub.load?.minions, ["web1"]);
    assert.deepEqual(map(await apiPublish({ token: tok.token }, { fun: "test.ping", arg: [], tgt: "db1" })).error, AUTHZ, "the token carries its user's rights, no more");

    assert.equal(await raw.clear({ cmd: "rm_token", token: tok.token }), true);
    assert.deepEqual(map(await apiPublish({ token: tok.token }, { fun: "test.ping", arg: [], tgt: "web1" })).error, AUTHN);
    assert.deepEqual(await raw.clear({ cmd: "get_token", token: tok.token }), {});
  });

  test("a token past its token_expire is refused and forgotten", async () => {
    const tok = map(await raw.clear({ cmd: "mk_token", ...creds("ops"), token_expire: 1 }));
    assert.ok(tok.expire - tok.start <= 1.001, "token_expire_user_override lets a user ask for a shorter life");
    assert.equal(await raw.clear({ cmd: "mk_token", ...creds("ops"), token_expire: 11 * 365 * 86400 }), "", "not a life over 10 years (the peers of a cluster refuse it)");
    await new Promise((r) => setTimeout(r, 1200));
    assert.deepEqual(map(await raw.clear({ cmd: "wheel", fun: "key.list_all", token: tok.token })).error.name, "TokenAuthenticationError");
    assert.deepEqual(await raw.clear({ cmd: "get_token", token: tok.token }), {});
  });

  test("repeated failed logins for one user are refused unasked for a while; another user is not locked out", async () => {
    for (let i = 0; i < 5; i++) assert.equal(await raw.clear({ cmd: "mk_token", ...creds("victim", "guess" + i) }), "");
    assert.equal(await raw.clear({ cmd: "mk_token", ...creds("victim") }), "", "throttled even with the right secret");
    await assertLogged(/user="victim".*verdict="denied: throttled after repeated failures/);
    const other = map(await raw.clear({ cmd: "mk_token", ...creds("ops") }));
    assert.equal(other.name, "ops");
  });

  test("the root key alone still publishes (the local salt CLI), and a wrong key does not", async () => {
    const ok = map(await raw.clear({ cmd: "publish", tgt: "web1", fun: "test.ping", arg: [], tgt_type: "glob", ret: "", jid: "", user: "root", key: tm.rootKey, kwargs: {} }));
    assert.deepEqual(ok.load?.minions, ["web1"]);
    const bad = map(await raw.clear({ cmd: "publish", tgt: "web1", fun: "test.ping", arg: [], tgt_type: "glob", ret: "", jid: "", user: "root", key: "nope", kwargs: {} }));
    assert.deepEqual(bad.error, AUTHN);
  });

  test("publisher_acl: a local user's own key (made at start) publishes what the list allows; it is not the root key", async () => {
    const fredKey = readFileSync(path.join(tm.cachedir, ".fred_key"), "utf8").trim();
    const pub = (user: string, key: string, fun: string) =>
      raw.clear({ cmd: "publish", tgt: "web1", fun, arg: [], tgt_type: "glob", ret: "", jid: "", user, key, kwargs: {} });
    assert.deepEqual(map(await pub("fred", fredKey, "test.ping")).load?.minions, ["web1"]);
    assert.deepEqual(map(await pub("fred", fredKey, "cmd.run")).error, AUTHZ);
    assert.deepEqual(map(await pub("root", fredKey, "cmd.run")).error, AUTHN, "Salt takes any local user's key for root; brine wants root's");
    assert.deepEqual(map(await pub("fred", "x" + fredKey, "test.ping")).error, AUTHN);
    // sudo_acl: sudo_<user> with the master's key gets <user>'s publisher_acl rights
    assert.deepEqual(map(await pub("sudo_fred", tm.rootKey, "test.ping")).load?.minions, ["web1"]);
    assert.deepEqual(map(await pub("sudo_fred", tm.rootKey, "cmd.run")).error, AUTHZ);
  });
});
