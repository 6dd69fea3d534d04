/**
 * The `sharedsecret` eauth backend (Salt's salt/auth/sharedsecret.py): any username, the password must be
 * the master's `sharedsecret`; the option is required when external_auth names the backend.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { makeSharedSecretBackend } from "../../../src/lib/auth/backends/sharedsecret.js";
import { warnAboutDangerousBackends } from "../../../src/lib/auth/backends/index.js";
import { isBrineError } from "../../../src/shared/errors.js";
import { BAD_CREDENTIALS, capturingLogger, cfgWith } from "./helpers.js";

const SECRET = "OIUHF_CHANGE_THIS_12h88";
const make = (secret: unknown = SECRET) => {
  const log = capturingLogger();
  return { b: makeSharedSecretBackend(cfgWith({ sharedsecret: secret, external_auth: { sharedsecret: { fred: [".*"] } } }), log), log };
};

test("any username with the shared secret is accepted; a near miss of the secret is refused", async () => {
  const { b } = make();
  for (const username of ["fred", "someone-else", "ünïcode"]) assert.equal(await b.authenticate({ username, password: SECRET }), true, username);
  for (const password of [SECRET.toLowerCase(), SECRET.slice(1), SECRET + " ", `${SECRET}${SECRET}`, "x"]) {
    assert.equal(await b.authenticate({ username: "fred", password }), false, password);
  }
});

for (const v of BAD_CREDENTIALS) {
  test(`the sharedsecret backend refuses ${v.what} with a log line`, async () => {
    const { b, log } = make();
    const creds = typeof v.creds.password === "string" && v.creds.password.startsWith("secret") ? { ...v.creds, password: v.creds.password.replace("secret", SECRET) } : v.creds;
    assert.equal(await b.authenticate(creds), false);
    assert.ok(log.saw("refused", "warning"), JSON.stringify(log.lines));
  });
}

test("sharedsecret missing, empty or not a string stops the start with CONFIG_INVALID naming the option", () => {
  for (const secret of [null, "", ["a"], { a: 1 }]) {
    assert.throws(() => make(secret), (e) => isBrineError(e, "CONFIG_INVALID") && (e as Error).message.includes("sharedsecret"), String(secret));
  }
});

test("a short shared secret is accepted, with a warning from the master's start checks only", async () => {
  const { b, log } = make("short");
  assert.equal(await b.authenticate({ username: "u", password: "short" }), true);
  assert.ok(!log.saw("shorter than", "warning"), "building the backend (in every worker) says nothing");
  const start = capturingLogger();
  warnAboutDangerousBackends(cfgWith({ sharedsecret: "short", external_auth: { sharedsecret: { u: [".*"] } } }), start);
  assert.ok(start.saw("shorter than", "warning"));
  assert.deepEqual(warnAboutDangerousBackends(cfgWith({ sharedsecret: SECRET, external_auth: { sharedsecret: { u: [".*"] } } }), capturingLogger()), [], "a long one is not warned about");
});
