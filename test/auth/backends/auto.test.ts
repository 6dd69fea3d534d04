/**
 * The `auto` eauth backend (Salt's test-only "always approved" salt/auth/auto.py), the loud warning the
 * master logs at start when external_auth names it, and the registry of backends (makeEauthBackends).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AutoEauthBackend } from "../../../src/lib/auth/backends/auto.js";
import { EAUTH_BACKEND_NAMES, makeEauthBackends, warnAboutDangerousBackends } from "../../../src/lib/auth/backends/index.js";
import { isBrineError } from "../../../src/shared/errors.js";
import { capturingLogger, cfgWith } from "./helpers.js";

test("auto approves any username with any password or none", async () => {
  const b = new AutoEauthBackend(capturingLogger());
  for (const creds of [{ username: "a", password: "x" }, { username: "root", password: "" }, { username: "b" }]) {
    assert.equal(await b.authenticate(creds), true, JSON.stringify(creds));
  }
});

test("auto still refuses a username that is empty, not a string or holds control characters, with a log line", async () => {
  const log = capturingLogger();
  const b = new AutoEauthBackend(log);
  for (const username of ["", 7, undefined, "x\u0000y", "a\r\nb"]) {
    log.clear();
    assert.equal(await b.authenticate({ username } as any), false, String(username));
    assert.ok(log.saw("refused", "warning"));
  }
});

test("the master's start warning names auto loudly when external_auth has it, and says nothing otherwise", () => {
  const log = capturingLogger();
  const said = warnAboutDangerousBackends(cfgWith({ external_auth: { auto: { "*": [".*"] }, file: {} } }), log);
  assert.equal(said.length, 1);
  assert.ok(log.saw(/auto.*EVERY username is accepted with ANY password/, "warning"));
  assert.deepEqual(warnAboutDangerousBackends(cfgWith({ external_auth: { pam: { "*": [".*"] } } }), capturingLogger()), []);
  assert.deepEqual(warnAboutDangerousBackends(cfgWith({}), capturingLogger()), []);
});

test("the start warning names each external_auth backend brine does not provide", () => {
  const log = capturingLogger();
  const said = warnAboutDangerousBackends(cfgWith({ external_auth: { django: { u: [".*"] }, sharedsecret: { u: [".*"] } } }), log);
  assert.equal(said.length, 1);
  assert.match(said[0], /"django", which brine does not provide/);
});

test("makeEauthBackends has every known backend; one external_auth does not name refuses with a log line", async () => {
  const log = capturingLogger();
  const m = makeEauthBackends(cfgWith({ external_auth: { auto: { "*": [".*"] } } }), log);
  assert.deepEqual([...m.keys()].sort(), [...EAUTH_BACKEND_NAMES].sort());
  for (const n of ["file", "sharedsecret", "auto", "ldap", "pam"]) assert.ok(EAUTH_BACKEND_NAMES.includes(n), n);
  for (const [name, b] of m) assert.equal(b.name, name);
  assert.equal(await m.get("auto")!.authenticate({ username: "x", password: "y" }), true);
  assert.equal(await m.get("sharedsecret")!.authenticate({ username: "x", password: "y" }), false);
  assert.ok(log.saw("external_auth does not name sharedsecret", "warning"));
});

test("makeEauthBackends validates the options of the backends external_auth names, and only theirs", () => {
  assert.throws(() => makeEauthBackends(cfgWith({ external_auth: { sharedsecret: { u: [".*"] } } }), capturingLogger()), (e) => isBrineError(e, "CONFIG_INVALID") && /sharedsecret/.test((e as Error).message));
  assert.throws(() => makeEauthBackends(cfgWith({ external_auth: { file: { u: [".*"] } } }), capturingLogger()), (e) => isBrineError(e, "CONFIG_INVALID") && /\^filename/.test((e as Error).message));
  assert.doesNotThrow(() => makeEauthBackends(cfgWith({ sharedsecret: "", external_auth: { auto: {} } }), capturingLogger()));
});
