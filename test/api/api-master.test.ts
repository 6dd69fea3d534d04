/**
 * The API thread inside a real master: started by `rest_cherrypy:` in the config, its requests carried
 * into the request lanes (a forged token is refused by the master's request workers, and nothing is
 * published), TLS with ssl_crt/ssl_key, and a config without certificates refused at start as Salt does.
 */
import { test, describe, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import https from "node:https";
import os from "node:os";
import path from "node:path";
import { startTestMaster, freePort, type TestMaster } from "../helpers/master.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import { isBrineError } from "../../src/shared/errors.js";

describe("HTTP API in a real master", () => {
  const stops: (() => Promise<void>)[] = [];
  after(async () => {
    for (const s of stops) await s();
  });

  test("a forged token gets the master's 401 and nothing is published", async () => {
    const port = await freePort();
    const tm: TestMaster = await startTestMaster({ rest_cherrypy: { port, host: "127.0.0.1", disable_ssl: true }, netapi_enable_clients: ["local", "runner", "wheel"] } as never);
    stops.push(() => tm.stop());
    const bus = new EventClient(tm.sockDir);
    await bus.connect();
    const tags: string[] = [];
    bus.on((e) => tags.push(e.tag));
    const base = `http://127.0.0.1:${port}`;
    assert.equal((await fetch(base + "/")).status, 200);
    for (const client of ["local", "runner", "wheel"]) {
      const r = await fetch(base + "/", {
        method: "POST",
        headers: { "content-type": "application/json", "x-auth-token": "0123456789abcdef0123456789abcdef" },
        body: JSON.stringify([{ client, tgt: "*", fun: client === "local" ? "cmd.run" : client === "runner" ? "jobs.list_jobs" : "key.list_all", arg: ["id"] }]),
      });
      assert.equal(r.status, 401, `${client} with a forged token`);
    }
    const login = await fetch(base + "/login", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ eauth: "auto", username: "nobody", password: "x" }) });
    assert.equal(login.status, 401);
    await new Promise((r) => setTimeout(r, 200));
    bus.close();
    assert.deepEqual(tags.filter((t) => t.startsWith("salt/job/") || t.startsWith("salt/run/") || t.startsWith("salt/wheel/")), []);
  });

  test("plain HTTP on a non-loopback address is served with a warning in the log", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "brine-api-log-"));
    stops.push(async () => rmSync(dir, { recursive: true, force: true }));
    const logFile = path.join(dir, "master.log");
    const tm = await startTestMaster({ rest_cherrypy: { port: await freePort("0.0.0.0"), host: "0.0.0.0", disable_ssl: true } } as never, undefined, { logFile });
    stops.push(() => tm.stop());
    let text = "";
    for (let i = 0; i < 50 && !text.includes("serves plain HTTP"); i++) {
      await new Promise((r) => setTimeout(r, 100));
      text = readFileSync(logFile, "utf8");
    }
    assert.match(text, /HTTP API serves plain HTTP on 0\.0\.0\.0/);
  });

  test("an API thread that dies is restarted on the same port", async () => {
    const port = await freePort();
    const tm = await startTestMaster({ rest_cherrypy: { port, host: "127.0.0.1", disable_ssl: true } } as never);
    stops.push(() => tm.stop());
    const base = `http://127.0.0.1:${port}`;
    assert.equal((await fetch(base + "/")).status, 200);
    await (tm.server as any).api.worker.terminate(); // as if it had crashed
    await assert.rejects(fetch(base + "/"));
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = await fetch(base + "/").then((r) => r.status, () => 0);
    }
    assert.equal(status, 200);
  });

  test("rest_cherrypy without ssl_crt/ssl_key and without disable_ssl stops the master's start", async () => {
    await assert.rejects(
      () => startTestMaster({ rest_cherrypy: { port: 1 } } as never),
      (e) => isBrineError(e, "CONFIG_INVALID") && /ssl_crt/.test(e.message),
    );
  });

  test("with ssl_crt and ssl_key the API speaks HTTPS", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "brine-api-tls-"));
    stops.push(async () => rmSync(dir, { recursive: true, force: true }));
    const crt = path.join(dir, "api.crt");
    const key = path.join(dir, "api.key");
    execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt, "-days", "1", "-subj", "/CN=localhost"], { stdio: "ignore" });
    const port = await freePort();
    const tm = await startTestMaster({ rest_cherrypy: { port, host: "127.0.0.1", ssl_crt: crt, ssl_key: key } } as never);
    stops.push(() => tm.stop());
    const body = await new Promise<string>((resolve, reject) => {
      https
        .get({ host: "127.0.0.1", port, path: "/", rejectUnauthorized: false }, (res) => {
          let s = "";
          res.on("data", (c) => (s += c));
          res.on("end", () => resolve(s));
        })
        .on("error", reject);
    });
    assert.equal(JSON.parse(body).return, "Welcome");
  });
});
