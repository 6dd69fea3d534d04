/**
 * The HTTP layer of the API against a scripted master: the clear loads it sends for each endpoint and
 * client (what salt-api sends over the request port), rest_cherrypy's response shapes and status codes,
 * and every bad-input refusal (nothing reaches the master). The real master is in api-e2e.test.ts.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import type { FastifyInstance } from "fastify";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { buildApp } from "../../src/api/app.js";
import { Netapi } from "../../src/api/netapi.js";
import { apiThreadConfig, readApiOptions } from "../../src/api/options.js";
import type { ClearRequester } from "../../src/api/master-link.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import type { WireValue } from "../../src/shared/protocol/msgpack.js";
import { configureLogging } from "../../src/shared/log.js";

const GOOD = "0123abcd0123abcd0123abcd0123abcd";
const JID = "20260101000000000001";

class ScriptedMaster implements ClearRequester {
  loads: Record<string, any>[] = [];
  fired: { tag: string; data: any }[] = [];
  listeners = new Set<(e: BusEvent) => void>();
  inFlight = 0;
  /** tokens get_token no longer knows (revoked or expired) */
  revoked = new Set<string>();

  emit(tag: string, data: any): void {
    for (const l of this.listeners) l({ tag, data });
  }

  private authed(l: Record<string, any>): boolean {
    const c = l.cmd === "publish" ? l.kwargs : l;
    return c.token === GOOD || (c.eauth === "sharedsecret" && c.username === "alice" && c.password === "s3cret");
  }

  sources: (string | undefined)[] = [];

  async request(load: Record<string, unknown>, source?: string): Promise<WireValue> {
    const l = load as Record<string, any>;
    this.loads.push(l);
    this.sources.push(source);
    const denied = { error: { name: "AuthenticationError", message: "Authentication error occurred." } };
    switch (l.cmd) {
      case "mk_token":
        return l.username === "alice" && l.password === "s3cret" ? { token: GOOD, start: 1, expire: 4e9, name: "alice", eauth: l.eauth } : "";
      case "rm_token":
        return l.token === GOOD;
      case "get_token":
        return l.token === GOOD && !this.revoked.has(l.token) ? { token: GOOD, start: 1, expire: 4e9, name: "alice", eauth: "sharedsecret" } : {};
      case "publish": {
        if (!this.authed(l)) return denied;
        if (l.tgt === "busy") return { error: "request queue is full, retry later" };
        if (l.tgt === "nomatch") return { enc: "clear", load: { jid: null, minions: [], error: "Master could not resolve minions" } };
        setTimeout(() => {
          this.emit(`salt/job/${JID}/ret/m1`, { id: "m1", jid: JID, return: true, retcode: 0 });
        }, 20);
        return { enc: "clear", load: { jid: JID, minions: l.tgt === "two" ? ["m1", "m2"] : ["m1"], missing: [] } };
      }
      case "runner": {
        if (!this.authed(l)) return denied;
        const jid = "20260101000000000002";
        setTimeout(() => this.emit(`salt/run/${jid}/ret`, { fun: `runner.${l.fun}`, jid, return: { listed: l.kwarg }, success: true }), 20);
        return { tag: `salt/run/${jid}`, jid };
      }
      case "wheel":
        if (!this.authed(l)) return denied;
        if (l.fun === "key.gen_accept") return { tag: "salt/wheel/3", data: { fun: "wheel.key.gen_accept", jid: "3", return: { pub: "PUB", priv: "PRIV" }, success: true } };
        return { tag: "salt/wheel/3", data: { fun: `wheel.${l.fun}`, jid: "3", user: "alice", return: { minions: ["m1"], minions_pre: [] }, success: true } };
      default:
        return {};
    }
  }

  fire(tag: string, data: unknown): void {
    this.fired.push({ tag, data });
  }
}

/** The API's HTTP layer on a free loopback port, its master scripted. */
async function startApp(cfg: MasterConfig, m: ScriptedMaster, sseRecheckMs?: number): Promise<{ app: FastifyInstance; base: string }> {
  configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });
  const opts = readApiOptions(cfg);
  const feed = {
    subscribe: (fn: (e: BusEvent) => void) => {
      m.listeners.add(fn);
      return () => void m.listeners.delete(fn);
    },
    ready: async () => undefined,
  };
  const app = await buildApp({ cfg, opts, netapi: new Netapi(cfg, opts, m, feed), feed, fire: (t, d) => m.fire(t, d), masterInFlight: () => 0, sseRecheckMs });
  await app.listen({ port: 0, host: "127.0.0.1" });
  return { app, base: `http://127.0.0.1:${(app.server.address() as { port: number }).port}` };
}

describe("HTTP API contract (scripted master)", () => {
  let app: FastifyInstance;
  let base: string;
  const m = new ScriptedMaster();
  const cfg: MasterConfig = {
    ...masterDefaults(),
    timeout: 1,
    gather_job_timeout: 1,
    rest_cherrypy: { port: 0, host: "127.0.0.1", disable_ssl: true, max_request_body_size: 4096, login_failures_per_minute: 3 },
    netapi_enable_clients: ["local", "local_async", "runner", "runner_async", "wheel", "local_batch"],
    external_auth: { sharedsecret: { alice: [".*", "@runner", "@wheel"] } },
  } as unknown as MasterConfig;

  before(async () => {
    ({ app, base } = await startApp(cfg, m));
  });
  after(async () => {
    await app.close();
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(base + path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });
  const auth = { "x-auth-token": GOOD };
  /** runs `fn` and returns the loads the master received meanwhile */
  const sent = async (fn: () => Promise<unknown>) => {
    const n = m.loads.length;
    await fn();
    return m.loads.slice(n);
  };

  test("login: good credentials give rest_cherrypy's token reply, a session cookie and the header", async () => {
    const r = await post("/login", { username: "alice", password: "s3cret", eauth: "sharedsecret" });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("x-auth-token"), GOOD);
    assert.match(r.headers.get("set-cookie") ?? "", new RegExp(`session_id=${GOOD}; .*HttpOnly`));
    const body = (await r.json()) as any;
    assert.deepEqual(body.return[0], { token: GOOD, expire: 4e9, start: 1, user: "alice", eauth: "sharedsecret", perms: [".*", "@runner", "@wheel"] });
    assert.deepEqual(m.loads.at(-1), { cmd: "mk_token", eauth: "sharedsecret", username: "alice", password: "s3cret" });
    assert.equal(m.sources.at(-1), "http:127.0.0.1", "the client's address goes with the request (the master's audit line and throttle)");
  });

  test("login: form bodies work as with curl -d", async () => {
    const r = await fetch(base + "/login", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "username=alice&password=s3cret&eauth=sharedsecret" });
    assert.equal(r.status, 200);
  });

  test("login: bad credentials are 401; past login_failures_per_minute the source gets 429 and the master is not asked", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await post("/login", { username: "alice", password: "wrong", eauth: "sharedsecret" });
      assert.equal(r.status, 401);
      assert.deepEqual(await r.json(), { status: 401, return: "Could not authenticate using provided credentials" });
    }
    const loads = await sent(async () => {
      const r = await post("/login", { username: "alice", password: "s3cret", eauth: "sharedsecret" });
      assert.equal(r.status, 429);
      assert.ok(Number(r.headers.get("retry-after")) >= 1);
    });
    assert.deepEqual(loads, []);
  });

  test("local: test.ping with the token returns {minion: return}; a targeted minion that never returned is false", async () => {
    const loads = await sent(async () => {
      const r = await post("/", [{ client: "local", tgt: "two", fun: "test.ping", arg: "x", kwarg: { a: 1 } }], auth);
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), { return: [{ m1: true, m2: false }] });
    });
    const pub = loads[0]!;
    assert.equal(pub.cmd, "publish");
    assert.deepEqual(pub.arg, ["x", { a: 1, __kwarg__: true }]);
    assert.equal(pub.kwargs.token, GOOD);
    assert.equal(pub.key, undefined, "the API never sends a key");
    assert.ok(loads.slice(1).every((l) => l.fun === "saltutil.find_job" && l.kwargs.token === GOOD), "find_job rounds carry the same token");
  });

  test("local with eauth credentials in the chunk (/run, no session) and an unmatched target", async () => {
    const r = await post("/run", [{ client: "local", tgt: "one", fun: "test.ping", eauth: "sharedsecret", username: "alice", password: "s3cret" }]);
    assert.deepEqual(await r.json(), { return: [{ m1: true }] });
    const none = await post("/", [{ client: "local_async", tgt: "nomatch", fun: "test.ping" }], auth);
    assert.deepEqual(await none.json(), { return: [{}] });
  });

  test("a full request lane at the master is 503 with Retry-After", async () => {
    const r = await post("/", [{ client: "local_async", tgt: "busy", fun: "test.ping" }], auth);
    assert.equal(r.status, 503);
    assert.equal(r.headers.get("retry-after"), "1");
    assert.match(((await r.json()) as any).return, /request queue is full/);
  });

  test("an Authentication error from the master is 401; a forged token never becomes a session", async () => {
    const r = await post("/", [{ client: "local", tgt: "*", fun: "test.ping" }], { "x-auth-token": "deadbeef" });
    assert.equal(r.status, 401);
    assert.deepEqual(await r.json(), { status: 401, return: "Authentication error occurred." });
  });

  test("runner and runner_async: Salt's runner load, the return from salt/run/<jid>/ret", async () => {
    const loads = await sent(async () => {
      const r = await post("/", [{ client: "runner", fun: "jobs.list_jobs", search_function: "test.*" }], auth);
      assert.deepEqual(await r.json(), { return: [{ listed: { arg: [], kwarg: { search_function: "test.*" } } }] });
    });
    assert.deepEqual(loads[0], { cmd: "runner", fun: "jobs.list_jobs", kwarg: { arg: [], kwarg: { search_function: "test.*" } }, token: GOOD });
    const a = await post("/", [{ client: "runner_async", fun: "jobs.list_jobs" }], auth);
    assert.deepEqual(await a.json(), { return: [{ tag: "salt/run/20260101000000000002", jid: "20260101000000000002" }] });
  });

  test("wheel: the master's {tag, data} reply; /keys answers data.return", async () => {
    const r = await post("/", [{ client: "wheel", fun: "key.list_all" }], auth);
    const body = (await r.json()) as any;
    assert.equal(body.return[0].data.fun, "wheel.key.list_all");
    assert.deepEqual(m.loads.at(-1), { cmd: "wheel", fun: "key.list_all", token: GOOD });
    const k = await fetch(base + "/keys", { headers: auth });
    assert.deepEqual(await k.json(), { return: { minions: ["m1"], minions_pre: [] } });
    const f = await fetch(base + "/keys/m1", { headers: { cookie: `session_id=${GOOD}` } });
    assert.equal(f.status, 200);
    assert.deepEqual(m.loads.at(-1), { cmd: "wheel", fun: "key.finger", match: "m1", token: GOOD });
  });

  test("POST /keys answers a tar of minion.pub and minion.pem from key.gen_accept", async () => {
    const r = await fetch(base + "/keys", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "mid=jerry&username=alice&password=s3cret&eauth=sharedsecret" });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("content-type"), "application/x-tar");
    const tar = Buffer.from(await r.arrayBuffer());
    assert.equal(tar.subarray(0, 10).toString(), "minion.pub");
    assert.equal(tar.subarray(512, 515).toString(), "PUB");
    assert.equal(tar.subarray(1024, 1034).toString(), "minion.pem");
    assert.equal(m.loads.at(-1)!.id_, "jerry");
  });

  test("YAML in and out", async () => {
    const r = await fetch(base + "/", { method: "POST", headers: { "content-type": "application/x-yaml", accept: "application/x-yaml", ...auth }, body: "- client: local\n  tgt: one\n  fun: test.ping\n" });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("content-type"), "application/x-yaml");
    assert.equal(await r.text(), "return:\n  - m1: true\n");
  });

  test("/minions, /minions/<id> (grains.items through local) and POST /minions (local_async, 202 with links)", async () => {
    const loads = await sent(async () => {
      const g = await fetch(base + "/minions/one", { headers: auth });
      assert.deepEqual(await g.json(), { return: [{ m1: true }] });
    });
    assert.deepEqual([loads[0]!.cmd, loads[0]!.tgt, loads[0]!.fun, loads[0]!.kwargs.token], ["publish", "one", "grains.items", GOOD]);
    const r = await post("/minions", { tgt: "one", fun: "test.ping" }, auth);
    assert.equal(r.status, 202);
    assert.deepEqual(await r.json(), { return: [{ jid: JID, minions: ["m1"] }], _links: { jobs: [{ href: `/jobs/${JID}` }] } });
  });

  test("/jobs and /jobs/<jid> go through jobs.list_jobs and jobs.list_job", async () => {
    const loads = await sent(async () => {
      assert.equal((await fetch(base + "/jobs", { headers: auth })).status, 200);
      assert.equal((await fetch(base + `/jobs/${JID}`, { headers: auth })).status, 200);
    });
    assert.deepEqual(loads.map((l) => [l.cmd, l.fun, l.kwarg]), [
      ["runner", "jobs.list_jobs", { arg: [], kwarg: {} }],
      ["runner", "jobs.list_job", { arg: [], kwarg: { jid: JID } }],
    ]);
  });

  test("/events streams the bus as Server-Sent Events once the master confirms the token", async () => {
    const ctl = new AbortController();
    const r = await fetch(base + `/events?token=${GOOD}`, { signal: ctl.signal, headers: { accept: "text/event-stream" } }); // as EventSource asks
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("content-type"), "text/event-stream");
    const reader = r.body!.getReader();
    setTimeout(() => m.emit("salt/job/1/new", { minions: ["m1"] }), 50);
    let text = "";
    while (!text.includes("salt/job/1/new\ndata:")) text += new TextDecoder().decode((await reader.read()).value);
    assert.match(text, /^retry: 400\n\ntag: salt\/job\/1\/new\ndata: \{"tag":"salt\/job\/1\/new","data":\{"minions":\["m1"\]\}\}\n\n/);
    ctl.abort();
    const bad = await fetch(base + "/events?token=feedface");
    assert.equal(bad.status, 401);
    assert.equal((await fetch(base + "/events")).status, 401);
  });

  test("/hook/<tag> fires salt/netapi/hook/<tag> with the body, never the caller's token", async () => {
    const r = await post("/hook/ci/build/ok", { revision: "aa22" }, auth);
    assert.deepEqual(await r.json(), { success: true });
    const ev = m.fired.at(-1)!;
    assert.equal(ev.tag, "salt/netapi/hook/ci/build/ok");
    assert.deepEqual(ev.data.post, { revision: "aa22" });
    assert.equal(ev.data.headers["x-auth-token"], undefined);
    const form = await fetch(base + "/hook/form", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...auth }, body: "foo=bar&arg=1" });
    assert.equal(form.status, 200);
    assert.deepEqual([m.fired.at(-1)!.data.body, m.fired.at(-1)!.data.post], ["foo=bar&arg=1", { foo: "bar", arg: [1] }]);
    assert.equal((await post("/hook/x", {}, {})).status, 401, "hooks need a session unless webhook_disable_auth");
    assert.equal((await post("/hook/x", {}, { "x-auth-token": "abcdef" })).status, 401, "an unknown token is refused");
  });

  test("/stats needs a session and reports the API's counters", async () => {
    assert.equal((await fetch(base + "/stats")).status, 401);
    const s = (await (await fetch(base + "/stats", { headers: auth })).json()) as any;
    assert.ok(s.brine_api.requests > 0);
  });

  describe("bad input: a clear 4xx and nothing sent to the master", () => {
    const refused = async (status: number, fn: () => Promise<Response>, text?: RegExp) => {
      const loads = await sent(async () => {
        const r = await fn();
        assert.equal(r.status, status);
        if (text) assert.match(((await r.json()) as any).return, text);
      });
      assert.deepEqual(loads, []);
    };
    test("a body over max_request_body_size is 413", () => refused(413, () => post("/", "[" + " ".repeat(5000) + "]", auth)));
    test("malformed JSON is 400", () => refused(400, () => post("/", "[{", auth), /Invalid JSON document/));
    test("malformed YAML is 400", () =>
      refused(400, () => fetch(base + "/", { method: "POST", headers: { "content-type": "application/x-yaml", ...auth }, body: "a: [b\n c: }" }), /Invalid YAML document/));
    test("an unsupported content type is 406", () => refused(406, () => fetch(base + "/", { method: "POST", headers: { "content-type": "application/xml", ...auth }, body: "<a/>" })));
    test("an unknown client is 400 naming the allowed ones", () => refused(400, () => post("/", [{ client: "bogus", tgt: "*", fun: "test.ping" }], auth), /Invalid client specified: 'bogus' \(one of: local, local_async/));
    test("a client not in netapi_enable_clients is 400", () => refused(400, () => post("/", [{ client: "wheel_async", fun: "key.list_all" }], auth), /Client disabled: 'wheel_async'/));
    test("local_batch is a clear 501", () => refused(501, () => post("/", [{ client: "local_batch", tgt: "*", fun: "test.ping" }], auth), /local_batch/));
    test("a target with control characters is 400", () => refused(400, () => post("/", [{ client: "local", tgt: "a\nb", fun: "test.ping" }], auth), /Invalid target/));
    test("a function that is not module.function is 400", () => refused(400, () => post("/", [{ client: "local", tgt: "*", fun: "test.ping; rm" }], auth), /Invalid function/));
    test("an unknown tgt_type is 400", () => refused(400, () => post("/", [{ client: "local", tgt: "*", fun: "test.ping", tgt_type: "sql" }], auth), /Invalid tgt_type/));
    test("a hook tag with bad characters is 400", () => refused(400, () => post("/hook/a/..%2F..%2Fsalt/job", {}, auth)));
    test("a lowstate that is not a list is 400", () => refused(400, () => post("/", "42", auth), /Lowstates must be a list/));
    test("no session on / is 401", () => refused(401, () => post("/", [{ client: "local", tgt: "*", fun: "test.ping" }])));
    test("a token that is not hex is 401 Invalid token", () => refused(401, () => post("/", [{ client: "local", tgt: "*", fun: "test.ping" }], { "x-auth-token": "../../etc" }), /Invalid token/));
    test("a chunk with neither token nor eauth on /run is 401", () => refused(401, () => post("/run", [{ client: "local", tgt: "*", fun: "test.ping" }]), /No authentication credentials given/));
    test("an invalid jid is 400", () => refused(400, () => fetch(base + "/jobs/123", { headers: auth })));
    test("an Accept the API cannot serve is 406", () => refused(406, () => fetch(base + "/", { headers: { accept: "text/html" } })));
  });
});

describe("HTTP API options", () => {
  const m = new ScriptedMaster();
  const withApi = async (section: Record<string, unknown>, fn: (base: string) => Promise<void>) => {
    const cfg = { ...masterDefaults(), rest_cherrypy: { port: 0, disable_ssl: true, ...section }, netapi_enable_clients: ["local_async"] } as unknown as MasterConfig;
    const { app, base } = await startApp(cfg, m);
    try {
      await fn(base);
    } finally {
      await app.close();
    }
  };

  test("requests_per_minute: past it a source gets 429 with Retry-After", () =>
    withApi({ requests_per_minute: 3 }, async (base) => {
      for (let i = 0; i < 3; i++) assert.equal((await fetch(base + "/")).status, 200);
      const r = await fetch(base + "/");
      assert.equal(r.status, 429);
      assert.ok(Number(r.headers.get("retry-after")) >= 1);
    }));

  test("authorized_ips: another address gets 403 Bad IP", () =>
    withApi({ authorized_ips: ["10.9.9.9"] }, async (base) => {
      const r = await fetch(base + "/");
      assert.equal(r.status, 403);
      assert.equal(((await r.json()) as any).return, "Bad IP");
    }));

  test("cors_origin: only listed origins get CORS headers (rest_cherrypy would echo any)", () =>
    withApi({ cors_origin: ["https://ui.example"] }, async (base) => {
      const ok = await fetch(base + "/", { headers: { origin: "https://ui.example" } });
      assert.equal(ok.headers.get("access-control-allow-origin"), "https://ui.example");
      const other = await fetch(base + "/", { headers: { origin: "https://evil.example" } });
      assert.equal(other.headers.get("access-control-allow-origin"), null);
      const pre = await fetch(base + "/", { method: "OPTIONS", headers: { origin: "https://ui.example", "access-control-request-method": "POST", "access-control-request-headers": "x-auth-token" } });
      assert.ok(pre.status < 300);
      assert.match(pre.headers.get("access-control-allow-headers") ?? "", /X-Auth-Token/);
    }));

  test("no cors_origin: no CORS headers at all", () =>
    withApi({}, async (base) => {
      const r = await fetch(base + "/", { headers: { origin: "https://ui.example" } });
      assert.equal(r.headers.get("access-control-allow-origin"), null);
    }));

  test("webhook_disable_auth and webhook_url: hooks without a session at the configured path", () =>
    withApi({ webhook_disable_auth: true, webhook_url: "/ci-hook" }, async (base) => {
      const r = await fetch(base + "/ci-hook/build", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      assert.equal(r.status, 200);
      assert.equal(m.fired.at(-1)!.tag, "salt/netapi/hook/build");
      assert.equal((await fetch(base + "/hook/build", { method: "POST", body: "" })).status, 404);
    }));

  test("an /events stream ends when the master stops knowing its token", async () => {
    const cfg = { ...masterDefaults(), rest_cherrypy: { port: 0, disable_ssl: true } } as unknown as MasterConfig;
    const { app, base } = await startApp(cfg, m, 100);
    try {
      const r = await fetch(base + `/events?token=${GOOD}`);
      assert.equal(r.status, 200);
      m.revoked.add(GOOD);
      let text = "";
      const reader = r.body!.getReader();
      for (;;) {
        const c = await reader.read();
        if (c.done) break;
        text += new TextDecoder().decode(c.value);
      }
      assert.match(text, /^retry: 400/);
    } finally {
      m.revoked.clear();
      await app.close();
    }
  });

  test("stats_disable_auth: /stats without a session", () => withApi({ stats_disable_auth: true }, async (base) => assert.equal((await fetch(base + "/stats")).status, 200)));

  test("POST /token mints a token from credentials without a session", () =>
    withApi({}, async (base) => {
      const r = await fetch(base + "/token", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ username: "alice", password: "s3cret", eauth: "sharedsecret" }) });
      assert.equal(((await r.json()) as any)[0].token, GOOD);
      const bad = await fetch(base + "/token", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ username: "alice" }) });
      assert.equal(bad.status, 400);
    }));

  test("the API thread gets no secret of the master and not its cachedir (where the root key is)", () => {
    const cfg = { ...masterDefaults(), cachedir: "/srv/m/cache", sharedsecret: "x", "auth.ldap.bindpw": "y", cluster_id: "c", rest_cherrypy: { port: 1 }, nodegroups: { g: "L@a" } } as unknown as MasterConfig;
    const t = apiThreadConfig(cfg) as unknown as Record<string, unknown>;
    assert.equal(t.sharedsecret, undefined);
    assert.equal(t["auth.ldap.bindpw"], undefined);
    assert.equal(t.cluster_id, null, "Salt's default, not the master's value");
    assert.notEqual(t.cachedir, "/srv/m/cache");
    assert.deepEqual([t.rest_cherrypy, t.nodegroups], [{ port: 1 }, { g: "L@a" }]);
  });

  test("bad option values stop the start, naming the option", () => {
    const bad = (section: Record<string, unknown>, top: Record<string, unknown> = {}) => () => readApiOptions({ ...masterDefaults(), rest_cherrypy: section, ...top } as unknown as MasterConfig);
    assert.throws(bad({ port: 70000, disable_ssl: true }), /rest_cherrypy\.port/);
    assert.throws(bad({ disable_ssl: "yes" }), /rest_cherrypy\.disable_ssl/);
    assert.throws(bad({ disable_ssl: true, cors_origin: [1] }), /rest_cherrypy\.cors_origin/);
    assert.throws(bad({ disable_ssl: true, webhook_url: "/a b" }), /webhook_url/);
    assert.throws(bad({ disable_ssl: true }, { netapi_enable_clients: ["local", "shell"] }), /netapi_enable_clients: unknown client 'shell'/);
    assert.equal(readApiOptions({ ...masterDefaults(), brine_api: { port: 9000, disable_ssl: true } } as unknown as MasterConfig).port, 9000);
  });
});
