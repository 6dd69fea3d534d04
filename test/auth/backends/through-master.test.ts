/**
 * The eauth backends inside a real master (request worker threads, the authorization core, the clear
 * request port): ldap users and their directory groups (`admins%`, `web%` with an `ldap(<base>)` target
 * expanded by process_acl), an htpasswd user of the file backend, a local PAM user; refusals get the
 * Python master's AuthenticationError / AuthorizationError and nothing is published.
 *
 * Needs slapd (and, for the PAM part, root and pamtester), which .ci/run installs; skips with a message
 * otherwise.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { RawClient } from "../../../src/lib/minion/raw-client.js";
import type { TestMinion } from "../../../src/lib/minion/test-minion.js";
import { isMap, type WireValue } from "../../../src/shared/protocol/msgpack.js";
import { startTestMaster, type TestMaster } from "../../helpers/master.js";
import { fastMinion, testKeys } from "../../helpers/minions.js";
import { LOOKUP_DN, LOOKUP_PW, SUFFIX, slapdSkipReason, startSlapd, type Slapd } from "./slapd.js";

const AUTHN = { name: "AuthenticationError", message: "Authentication error occurred." };
const AUTHZ = { name: "AuthorizationError", message: "Authorization error occurred." };
const skip = slapdSkipReason();
if (skip) console.log(`# eauth backends through a master skipped: ${skip}`);
const pamSkip = typeof process.getuid === "function" && process.getuid() !== 0
  ? "needs root to create a local user"
  : !["/usr/bin/pamtester", "/usr/local/bin/pamtester", "/bin/pamtester"].some((p) => existsSync(p))
    ? "pamtester is not installed (.ci/run installs it)"
    : undefined;
const PAM_USER = `brinepame${process.pid % 100_000}`;
const PAM_PASSWORD = "pam-e2e-Pw 1";

describe("eauth backends through a real master", { skip, timeout: 300_000 }, () => {
  let slapd: Slapd;
  let tm: TestMaster;
  let web: TestMinion;
  let db: TestMinion;
  let raw: RawClient;
  let dir: string;

  before(async () => {
    slapd = await startSlapd();
    dir = mkdtempSync(path.join(os.tmpdir(), "brine-eauth-e2e-"));
    const htpasswd = path.join(dir, "htpasswd");
    writeFileSync(htpasswd, "cory:$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/\n"); // password "secret"
    if (!pamSkip) {
      execFileSync("useradd", ["--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", PAM_USER]);
      execFileSync("chpasswd", [], { input: `${PAM_USER}:${PAM_PASSWORD}\n` });
    }
    tm = await startTestMaster({
      auto_accept: true,
      external_auth: {
        ldap: {
          "admins%": [".*"],
          "web%": [{ [`ldap(ou=Computers,${SUFFIX})`]: ["test.echo"] }],
        },
        file: { "^filename": htpasswd, "^filetype": "htpasswd", cory: [{ web1: ["test.ping"] }] },
        pam: { [`${PAM_USER}`]: [{ db1: ["test.ping"] }] },
      },
      "auth.ldap.uri": slapd.url,
      "auth.ldap.basedn": SUFFIX,
      "auth.ldap.binddn": LOOKUP_DN,
      "auth.ldap.bindpw": LOOKUP_PW,
      "auth.ldap.filter": "uid={{ username }}",
      "auth.ldap.minion_stripdomains": [".example.org"],
      ...(pamSkip ? { "auth.pam.helper": "/bin/false" } : {}),
    });
    const k = await testKeys(2);
    web = fastMinion(tm, "web1", k[0]!);
    db = fastMinion(tm, "db1", k[1]!);
    await web.start();
    await db.start();
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 15_000 });
  });
  after(async () => {
    raw?.close();
    await web?.stop();
    await db?.stop();
    await tm?.stop();
    await slapd?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    if (!pamSkip) execFileSync("userdel", [PAM_USER]);
  });

  const map = (v: WireValue) => {
    assert.ok(isMap(v), `a map, got ${JSON.stringify(v)}`);
    return v as Record<string, any>;
  };
  /** salt-api's LocalClient load: the root key beside the user's eauth credentials */
  const publish = (eauth: string, username: string, password: string, fun: string, tgt: string, arg: unknown[] = []) =>
    raw.clear({ cmd: "publish", tgt, fun, arg, tgt_type: "glob", ret: "", jid: "", user: "salt-api", key: tm.rootKey, kwargs: { show_jid: false, eauth, username, password } });
  const minionsOf = async (p: Promise<WireValue>) => {
    const r = map(await p);
    assert.ok(isMap(r.load), JSON.stringify(r));
    return [...(r.load.minions as string[])].sort();
  };
  const errorOf = async (p: Promise<WireValue>) => map(await p).error;

  test("an ldap user in admins (a posixGroup) may run anything anywhere; a wrong password or a hostile username is refused", async () => {
    assert.deepEqual(await minionsOf(publish("ldap", "alice", "alice-pw", "test.ping", "*")), ["db1", "web1"]);
    assert.deepEqual(await errorOf(publish("ldap", "alice", "bob-pw", "test.ping", "*")), AUTHN);
    assert.deepEqual(await errorOf(publish("ldap", "al*", "alice-pw", "test.ping", "*")), AUTHN);
    assert.deepEqual(await errorOf(publish("ldap", "*)(uid=*", "alice-pw", "test.ping", "*")), AUTHN);
  });

  test("an ldap user in web gets test.echo on the directory's computers (ldap(...) expanded) and nothing else", async () => {
    // each expanded entry names one minion; Salt checks a target against one entry at a time
    assert.deepEqual(await minionsOf(publish("ldap", "bob", "bob-pw", "test.echo", "web1", ["hi"])), ["web1"], "web1.example.org, domain stripped");
    assert.deepEqual(await minionsOf(publish("ldap", "bob", "bob-pw", "test.echo", "db1", ["hi"])), ["db1"]);
    assert.deepEqual(await errorOf(publish("ldap", "bob", "bob-pw", "test.ping", "web1")), AUTHZ);
  });

  test("an ldap user in no group is authenticated but may do nothing", async () => {
    assert.deepEqual(await errorOf(publish("ldap", "carol", "carol-pw", "test.ping", "web1")), AUTHZ);
  });

  test("an ldap token carries the user's groups: publishing with it has the group's rights", async () => {
    const tok = map(await raw.clear({ cmd: "mk_token", eauth: "ldap", username: "alice", password: "alice-pw" }));
    assert.match(String(tok.token), /^[0-9a-f]+$/);
    assert.deepEqual([...(tok.groups ?? [])].sort(), ["admins", "web"]);
    const r = map(await raw.clear({ cmd: "publish", tgt: "db1", fun: "test.ping", arg: [], tgt_type: "glob", ret: "", jid: "", user: "salt-api", key: tm.rootKey, kwargs: { show_jid: false, token: tok.token } }));
    assert.deepEqual(r.load?.minions, ["db1"]);
  });

  test("an htpasswd user of the file backend runs what its entry allows, on its minion only", async () => {
    assert.deepEqual(await minionsOf(publish("file", "cory", "secret", "test.ping", "web1")), ["web1"]);
    assert.deepEqual(await errorOf(publish("file", "cory", "secret", "test.ping", "db1")), AUTHZ);
    assert.deepEqual(await errorOf(publish("file", "cory", "Secret", "test.ping", "web1")), AUTHN);
  });

  test("a local PAM user runs what its entry allows; a wrong password is refused", { skip: pamSkip }, async () => {
    assert.deepEqual(await minionsOf(publish("pam", PAM_USER, PAM_PASSWORD, "test.ping", "db1")), ["db1"]);
    assert.deepEqual(await errorOf(publish("pam", PAM_USER, "wrong", "test.ping", "db1")), AUTHN);
  });
});
