/**
 * The `pam` eauth backend (Salt's salt/auth/pam.py) through Debian's pamtester, with a real local user
 * the test creates (useradd + chpasswd, removed afterwards). Those tests need root and pamtester (.ci/run
 * installs it) and skip with a message otherwise; the option and input checks run everywhere.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { makePamBackend, PamEauthBackend } from "../../../src/lib/auth/backends/pam.js";
import { warnAboutDangerousBackends } from "../../../src/lib/auth/backends/index.js";
import { isBrineError } from "../../../src/shared/errors.js";
import { BAD_CREDENTIALS, capturingLogger, cfgWith } from "./helpers.js";

const PAMTESTER = ["/usr/bin/pamtester", "/usr/local/bin/pamtester", "/bin/pamtester"].find((p) => existsSync(p));
const skip = typeof process.getuid === "function" && process.getuid() !== 0
  ? "the pam tests create a local user and need root"
  : !PAMTESTER
    ? "pamtester is not installed (Debian: apt-get install pamtester; .ci/run installs it)"
    : !existsSync("/etc/pam.d/login")
      ? "there is no PAM service \"login\" (/etc/pam.d/login)"
      : undefined;
if (skip) console.log(`# pam eauth tests with a local user skipped: ${skip}`);

const USER = `brinepam${process.pid % 100_000}`;
const GROUP = `brinepamg${process.pid % 100_000}`;
const PASSWORD = "Pä ss:wörd-1";
const sh = (cmd: string, args: string[], input?: string) => execFileSync(cmd, args, { input, stdio: ["pipe", "ignore", "pipe"], timeout: 30_000 });

describe("pam eauth with a real local user", { skip }, () => {
  before(() => {
    sh("groupadd", [GROUP]);
    sh("useradd", ["--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", USER]);
    sh("usermod", ["-aG", GROUP, USER]);
    sh("chpasswd", [], `${USER}:${PASSWORD}\n`);
  });
  after(() => {
    try {
      sh("userdel", [USER]);
    } finally {
      sh("groupdel", [GROUP]);
    }
  });
  const make = () => {
    const log = capturingLogger();
    return { b: makePamBackend(cfgWith({ external_auth: { pam: { [USER]: [".*"] } } }), log), log };
  };

  test("a local user's password is accepted through PAM and any other is refused", async () => {
    const { b } = make();
    assert.equal(await b.authenticate({ username: USER, password: PASSWORD }), true);
    // failures wait in pam_faildelay: checked side by side
    const refused = await Promise.all(
      [PASSWORD.toUpperCase(), PASSWORD.slice(0, -1), `${PASSWORD}x`, ` ${PASSWORD}`, "password"].map((password) => b.authenticate({ username: USER, password })),
    );
    assert.deepEqual(refused, [false, false, false, false, false]);
  });

  test("a user PAM does not know is refused", async () => {
    const { b } = make();
    assert.equal(await b.authenticate({ username: `${USER}x`, password: PASSWORD }), false);
  });

  test("an expired account is refused with its right password: PAM's account check runs too", async () => {
    const { b } = make();
    sh("chage", ["-E", "0", USER]);
    try {
      assert.equal(await b.authenticate({ username: USER, password: PASSWORD }), false);
    } finally {
      sh("chage", ["-E", "-1", USER]);
    }
    assert.equal(await b.authenticate({ username: USER, password: PASSWORD }), true);
  });

  test("the user's system groups come back sorted, its own group and the supplementary one", async () => {
    const { b } = make();
    assert.deepEqual(await b.groups!({ username: USER }), [USER, GROUP].sort());
    assert.deepEqual(await b.groups!({ username: `${USER}x` }), []);
  });

  test("a password with a line break is refused before it reaches PAM, even when its first line is right", async () => {
    const { b, log } = make();
    assert.equal(await b.authenticate({ username: USER, password: `${PASSWORD}\nsecond answer` }), false);
    assert.ok(log.saw("cannot pass on", "warning"));
  });
});

/** a backend whose options need no pamtester: its input checks run before any helper */
function offline() {
  const log = capturingLogger();
  return { b: new PamEauthBackend({ service: "login", helper: "/nonexistent/pamtester", timeoutMs: 1000 }, log), log };
}

const PAM_BAD: { what: string; creds: any }[] = [
  ...BAD_CREDENTIALS,
  { what: "a username starting with '-' (an option to the helper)", creds: { username: "-v", password: "x" } },
  { what: "a username with a space", creds: { username: "root x", password: "x" } },
  { what: "a username with a slash", creds: { username: "../root", password: "x" } },
  { what: "a password with a line break", creds: { username: "alice", password: "a\nb" } },
  { what: "a password of 600 bytes (over PAM's response size)", creds: { username: "alice", password: "p".repeat(600) } },
];

for (const v of PAM_BAD) {
  test(`the pam backend refuses ${v.what} with a log line, without running its helper`, async () => {
    const { b, log } = offline();
    assert.equal(await b.authenticate(v.creds), false, "a helper run would have thrown EAUTH_BACKEND");
    assert.ok(log.saw("refused", "warning"), JSON.stringify(log.lines));
  });
}

/** runs `body` with a throwaway executable shell script standing in for pamtester */
async function withHelper(script: string, body: (helper: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-pam-"));
  try {
    const helper = path.join(dir, "helper");
    writeFileSync(helper, `#!/bin/sh\n${script}\n`);
    chmodSync(helper, 0o755);
    await body(helper);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("a PAM helper that does not answer in auth.pam.timeout is a backend failure (EAUTH_BACKEND)", () =>
  withHelper("exec sleep 30", async (helper) => {
    const b = makePamBackend(cfgWith({ "auth.pam.helper": helper, "auth.pam.timeout": 0.3 }), capturingLogger());
    await assert.rejects(b.authenticate({ username: "alice", password: "pw" }), (e) => isBrineError(e, "EAUTH_BACKEND") && /no answer/.test((e as Error).message));
  }));

test("a PAM helper that exits 1 refuses, and its words are logged at debug", () =>
  withHelper("read pw\necho 'pamtester: Authentication failure' >&2\nexit 1", async (helper) => {
    const log = capturingLogger();
    const b = makePamBackend(cfgWith({ "auth.pam.helper": helper }), log);
    assert.equal(await b.authenticate({ username: "alice", password: "pw" }), false);
    assert.ok(log.saw("Authentication failure"));
  }));

test("pam runs a bounded number of helpers at once, queues a few more checks and refuses the rest as a backend failure", () =>
  withHelper("read pw\nsleep 0.3\n[ \"$pw\" = right ]", async (helper) => {
    const b = new PamEauthBackend({ service: "login", helper, timeoutMs: 10_000, runningMax: 2, waitingMax: 1 }, capturingLogger());
    const results = await Promise.allSettled(["right", "wrong", "right", "right"].map((password) => b.authenticate({ username: "alice", password })));
    assert.deepEqual(results.slice(0, 3).map((r) => r.status === "fulfilled" && r.value), [true, false, true], "two running, one waited its turn");
    assert.equal(results[3].status, "rejected");
    assert.ok(isBrineError((results[3] as PromiseRejectedResult).reason, "EAUTH_BACKEND"));
    assert.equal(await b.authenticate({ username: "alice", password: "right" }), true, "the slots were given back");
  }));

test("a pam service PAM has no file for is warned about by the master's start checks", () => {
  const cfg = cfgWith({ "auth.pam.helper": "/bin/sh", "auth.pam.service": "brine-no-such-service", external_auth: { pam: {} } });
  const log = capturingLogger();
  warnAboutDangerousBackends(cfg, log);
  assert.ok(log.saw(/auth.pam.service brine-no-such-service: .* does not exist/, "warning"), JSON.stringify(log.lines));
  if (existsSync("/etc/pam.d/login")) assert.deepEqual(warnAboutDangerousBackends(cfgWith({ ...cfg, "auth.pam.service": "login" }), capturingLogger()), []);
});

const BAD_OPTIONS: { what: string; opts: Record<string, unknown>; names: string }[] = [
  { what: "a helper that does not exist", opts: { "auth.pam.helper": "/nonexistent/pamtester" }, names: "auth.pam.helper" },
  { what: "a service name with a path", opts: { "auth.pam.service": "../../etc/passwd" }, names: "auth.pam.service" },
  { what: "a service name starting with '-'", opts: { "auth.pam.service": "-v" }, names: "auth.pam.service" },
  { what: "a timeout that is not a number", opts: { "auth.pam.timeout": "soon" }, names: "auth.pam.timeout" },
];

for (const v of BAD_OPTIONS) {
  test(`pam options with ${v.what} stop the start with CONFIG_INVALID naming the option`, () => {
    assert.throws(() => makePamBackend(cfgWith({ "auth.pam.helper": "/bin/sh", ...v.opts }), capturingLogger()), (e) => isBrineError(e, "CONFIG_INVALID") && (e as Error).message.includes(v.names));
  });
}
