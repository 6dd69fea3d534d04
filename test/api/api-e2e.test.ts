/**
 * The HTTP API end to end: a real master with `rest_cherrypy:` and `external_auth` (sharedsecret), test
 * minions, and fetch as the client. Login good and bad, `local` test.ping with the token, a user's ACL
 * enforced by the master (not by the API), the runner jobs.list_jobs, the wheel key.list_all, an
 * /events stream that sees a job, and a webhook event on the bus.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { TestMaster } from "../helpers/master.js";
import { API_SECRET, startApiMaster } from "../helpers/api.js";
import { fastMinion, testKeys } from "../helpers/minions.js";

describe("HTTP API end to end", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let base: string;
  let token: string;
  const minions: TestMinion[] = [];

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(base + path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  const login = (username: string, password: string) => post("/login", { username, password, eauth: "sharedsecret" });

  before(async () => {
    ({ tm, base } = await startApiMaster());
    const k = await testKeys(2);
    for (const [i, id] of ["api-m1", "api-m2"].entries()) minions.push(fastMinion(tm, id, k[i]!, { grains: { id, os: "Debian" } }));
    await Promise.all(minions.map((m) => m.start()));
  });
  after(async () => {
    for (const m of minions) await m.stop();
    await tm.stop();
  });

  test("login: a wrong secret is 401, the right one gives a token the master knows", async () => {
    assert.equal((await login("alice", "wrong")).status, 401);
    const r = await login("alice", API_SECRET);
    assert.equal(r.status, 200);
    const body = (await r.json()) as any;
    token = body.return[0].token;
    assert.match(token, /^[0-9a-f]+$/);
    assert.equal(body.return[0].user, "alice");
    assert.equal(body.return[0].eauth, "sharedsecret");
    assert.ok(body.return[0].expire > Date.now() / 1000);
  });

  test("local test.ping with the token returns every minion's True", async () => {
    const r = await post("/", [{ client: "local", tgt: "api-*", fun: "test.ping" }], { "x-auth-token": token });
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { return: [{ "api-m1": true, "api-m2": true }] });
  });

  test("the master enforces a user's ACL: bob may test.ping but not cmd.run, and nothing runs", async () => {
    const b = (await (await login("bob", API_SECRET)).json()) as any;
    const bob = { "x-auth-token": b.return[0].token };
    assert.deepEqual(await (await post("/", [{ client: "local", tgt: "api-m1", fun: "test.ping" }], bob)).json(), { return: [{ "api-m1": true }] });
    const bus = new EventClient(tm.sockDir);
    await bus.connect();
    const news: string[] = [];
    bus.on((e) => e.tag.endsWith("/new") && news.push(e.tag));
    const r = await post("/", [{ client: "local", tgt: "api-m1", fun: "cmd.run", arg: ["id"] }], bob);
    assert.equal(r.status, 401);
    await new Promise((res) => setTimeout(res, 200));
    bus.close();
    assert.deepEqual(news, []);
  });

  test("arguments the master's decoder would refuse are a clear 413/400 from the API, and nothing is published", async () => {
    const bus = new EventClient(tm.sockDir);
    await bus.connect();
    const news: string[] = [];
    bus.on((e) => e.tag.endsWith("/new") && news.push(e.tag));
    // a body over max_request_body_size (1 MiB, as the master's brine_clear_request_bytes_max) is refused unread
    const big = await post("/", [{ client: "local", tgt: "api-m1", fun: "test.echo", arg: ["x".repeat(1_100_000)] }], { "x-auth-token": token });
    assert.equal(big.status, 413);
    assert.match(JSON.stringify(await big.json()), /max_request_body_size|brine_clear_request_bytes_max/);
    let deep: unknown = "x";
    for (let i = 0; i < 200; i++) deep = [deep];
    const nested = await post("/", [{ client: "local", tgt: "api-m1", fun: "test.echo", arg: [deep] }], { "x-auth-token": token });
    assert.equal(nested.status, 400);
    await new Promise((res) => setTimeout(res, 200));
    bus.close();
    assert.deepEqual(news, []);
  });

  test("a call with 100 KB of arguments reaches the minion (the master takes a clear publish up to 1 MiB, as Salt takes large ones)", async () => {
    const text = "z".repeat(100_000);
    const r = await post("/", [{ client: "local", tgt: "api-m1", fun: "test.echo", arg: [text] }], { "x-auth-token": token });
    assert.equal(r.status, 200);
    assert.equal(((await r.json()) as any).return[0]["api-m1"], text);
  });

  test("the runner jobs.list_jobs lists the job just run", async () => {
    const a = (await (await post("/", [{ client: "local_async", tgt: "api-m1", fun: "test.ping" }], { "x-auth-token": token })).json()) as any;
    const jid = a.return[0].jid;
    const r = await post("/", [{ client: "runner", fun: "jobs.list_jobs" }], { "x-auth-token": token });
    assert.equal(r.status, 200);
    const jobs = ((await r.json()) as any).return[0];
    assert.ok(jid in jobs, `jobs.list_jobs has ${jid}`);
    const j = await fetch(`${base}/jobs`, { headers: { "x-auth-token": token } });
    assert.ok(jid in ((await j.json()) as any).return[0]);
    let one: any;
    for (let i = 0; i < 50; i++) {
      one = await (await fetch(`${base}/jobs/${jid}`, { headers: { "x-auth-token": token } })).json();
      if (one.return?.[0]?.["api-m1"] !== undefined) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    assert.deepEqual(one.return, [{ "api-m1": true }]);
    assert.equal(one.info[0].Function, "test.ping");
  });

  test("the wheel key.list_all lists the accepted minions, also through GET /keys", async () => {
    const r = await post("/", [{ client: "wheel", fun: "key.list_all" }], { "x-auth-token": token });
    assert.equal(r.status, 200);
    const body = (await r.json()) as any;
    assert.deepEqual(body.return[0].data.return.minions, ["api-m1", "api-m2"]);
    const k = (await (await fetch(`${base}/keys`, { headers: { "x-auth-token": token } })).json()) as any;
    assert.deepEqual(k.return.minions, ["api-m1", "api-m2"]);
  });

  test("/events streams a job's events to a token holder", async () => {
    const ctl = new AbortController();
    const r = await fetch(`${base}/events?token=${token}`, { signal: ctl.signal });
    assert.equal(r.status, 200);
    const reader = r.body!.getReader();
    let text = "";
    await reader.read(); // "retry: 400", written once the stream is subscribed
    const a = (await (await post("/minions", { tgt: "api-m2", fun: "test.ping" }, { "x-auth-token": token })).json()) as any;
    const jid = a.return[0].jid;
    while (!text.includes(`tag: salt/job/${jid}/ret/api-m2`)) text += new TextDecoder().decode((await reader.read()).value);
    ctl.abort();
    assert.match(text, new RegExp(`tag: salt/job/${jid}/new\ndata: \\{"tag":"salt/job/${jid}/new"`));
  });

  test("/hook/<tag> puts salt/netapi/hook/<tag> on the master's bus", async () => {
    const bus = new EventClient(tm.sockDir);
    await bus.connect();
    const seen = new Promise<any>((resolve) => bus.on((e) => e.tag === "salt/netapi/hook/deploy/done" && resolve(e.data)));
    const r = await post("/hook/deploy/done", { build: 42 }, { "x-auth-token": token });
    assert.deepEqual(await r.json(), { success: true });
    const data = await seen;
    bus.close();
    assert.deepEqual(data.post, { build: 42 });
  });

  test("an expired token is refused by the master and by /events", async () => {
    const r = await post("/login", { username: "alice", password: API_SECRET, eauth: "sharedsecret", token_expire: 1 });
    const short = ((await r.json()) as any).return[0].token;
    assert.equal((await post("/", [{ client: "local", tgt: "api-m1", fun: "test.ping" }], { "x-auth-token": short })).status, 200);
    await new Promise((res) => setTimeout(res, 1500));
    assert.equal((await post("/", [{ client: "local", tgt: "api-m1", fun: "test.ping" }], { "x-auth-token": short })).status, 401);
    assert.equal((await fetch(`${base}/events?token=${short}`)).status, 401);
  });

  test("logout clears the cookie and revokes the token at the master", async () => {
    const r = await fetch(`${base}/logout`, { method: "POST", headers: { "x-auth-token": token } });
    assert.equal(r.status, 200);
    assert.match(r.headers.get("set-cookie") ?? "", /session_id=;/);
    const again = await post("/", [{ client: "local", tgt: "api-*", fun: "test.ping" }], { "x-auth-token": token });
    assert.equal(again.status, 401);
  });
});
