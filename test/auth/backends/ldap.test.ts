/**
 * The `ldap` eauth backend (Salt's salt/auth/ldap.py) against a real OpenLDAP slapd (./slapd.ts, Debian's
 * package, which .ci/run installs; these tests skip with a message only when slapd is not on the machine):
 * binds through a lookup account or a DN template, group membership in its three modes, process_acl's
 * ldap(...) expansion, escaping of hostile usernames, directory failures, option checks.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { escapeDnValue, escapeFilterValue, makeLdapBackend } from "../../../src/lib/auth/backends/ldap.js";
import { warnAboutDangerousBackends } from "../../../src/lib/auth/backends/index.js";
import { isBrineError } from "../../../src/shared/errors.js";
import { freePort } from "../../../tools/free-port.js";
import { BAD_CREDENTIALS, capturingLogger, cfgWith } from "./helpers.js";
import { LOOKUP_DN, LOOKUP_PW, SUFFIX, slapdSkipReason, startSlapd, type Slapd } from "./slapd.js";

test("filter values and DN values are escaped as RFC 4515 and RFC 4514 say", () => {
  const filter: [string, string][] = [["alice", "alice"], ["*", "\\2a"], ["*)(uid=*", "\\2a\\29\\28uid=\\2a"], ["a\\b", "a\\5cb"], ["nul\u0000", "nul\\00"]];
  for (const [v, want] of filter) assert.equal(escapeFilterValue(v), want, v);
  const dn: [string, string][] = [["alice", "alice"], ["a,ou=x", "a\\,ou\\=x"], ["+\"<>;\\", "\\+\\\"\\<\\>\\;\\\\"], [" lead", "\\ lead"], ["#hash", "\\#hash"], ["trail ", "trail\\ "]];
  for (const [v, want] of dn) assert.equal(escapeDnValue(v), want, v);
});

const skip = slapdSkipReason();
if (skip) console.log(`# ldap eauth tests against slapd skipped: ${skip}`);

describe("ldap eauth against a real slapd", { skip }, () => {
  let slapd: Slapd;
  before(async () => {
    slapd = await startSlapd();
  });
  after(async () => {
    await slapd?.stop();
  });

  const lookup = (extra: Record<string, unknown> = {}) => ({
    "auth.ldap.uri": slapd.url,
    "auth.ldap.basedn": SUFFIX,
    "auth.ldap.binddn": LOOKUP_DN,
    "auth.ldap.bindpw": LOOKUP_PW,
    "auth.ldap.filter": "uid={{ username }}",
    "auth.ldap.timeout": 5,
    ...extra,
  });
  const template = (extra: Record<string, unknown> = {}) => ({
    "auth.ldap.server": "127.0.0.1",
    "auth.ldap.port": String(slapd.port),
    "auth.ldap.basedn": SUFFIX,
    "auth.ldap.binddn": `uid={{ username }},ou=People,${SUFFIX}`,
    ...extra,
  });
  const make = (opts: Record<string, unknown>) => {
    const log = capturingLogger();
    return { b: makeLdapBackend(cfgWith({ ...opts, external_auth: { ldap: { "admins%": [".*"] } } }), log), log };
  };

  for (const [mode, opts] of [["a lookup account and filter", lookup], ["a binddn template", template]] as const) {
    test(`through ${mode}, a user binds with their password and is refused with another`, async () => {
      const { b } = make(opts());
      assert.equal(await b.authenticate({ username: "alice", password: "alice-pw" }), true);
      assert.equal(await b.authenticate({ username: "bob", password: "bob-pw" }), true);
      assert.equal(await b.authenticate({ username: "alice", password: "bob-pw" }), false);
      assert.equal(await b.authenticate({ username: "alice", password: "alice-pw " }), false);
      assert.equal(await b.authenticate({ username: "nobody", password: "alice-pw" }), false);
      assert.equal(await b.authenticate({ username: "a*b", password: "star-pw" }), true, "a literal * in a real uid");
    });

    test(`through ${mode}, usernames with filter or DN metacharacters match no one`, async () => {
      const { b } = make(opts());
      for (const [username, password] of [
        ["al*", "alice-pw"], // unescaped, uid=al* finds exactly alice
        ["*", "alice-pw"],
        ["*)(uid=*", "alice-pw"],
        ["alice)(|(uid=*", "alice-pw"],
        ["a*", "star-pw"],
        ["alice,ou=People", "alice-pw"],
        ["alice\\", "alice-pw"],
      ]) {
        assert.equal(await b.authenticate({ username, password }), false, username);
      }
    });

    test(`through ${mode}, hostile usernames read no groups`, async () => {
      const { b } = make(opts());
      for (const username of ["*", "*)(memberUid=*", "ali*"]) assert.deepEqual(await b.groups!({ username, password: "alice-pw" }), [], username);
    });
  }

  test("posixGroup memberships (Salt's default: ou=Groups, memberUid) come back as group names", async () => {
    const { b } = make(lookup());
    assert.deepEqual((await b.groups!({ username: "alice", password: "alice-pw" })).sort(), ["admins", "web"]);
    assert.deepEqual(await b.groups!({ username: "bob", password: "bob-pw" }), ["web"]);
    assert.deepEqual(await b.groups!({ username: "carol", password: "carol-pw" }), []);
    assert.deepEqual((await b.groups!({ username: "alice" })).sort(), ["admins", "web"], "the lookup account reads them: no password needed");
  });

  test("without a lookup account the groups are read bound as the user, and a wrong password reads none", async () => {
    const { b, log } = make(template());
    assert.deepEqual((await b.groups!({ username: "alice", password: "alice-pw" })).sort(), ["admins", "web"]);
    assert.deepEqual(await b.groups!({ username: "alice", password: "wrong" }), []);
    assert.ok(log.saw("wrong password", "warning"));
    assert.deepEqual(await b.groups!({ username: "alice" }), [], "no password, no bind as the user");
    assert.deepEqual((await make(template({ "auth.ldap.anonymous": true })).b.groups!({ username: "alice" })).sort(), ["admins", "web"], "auth.ldap.anonymous: read anonymously");
  });

  test("Active Directory mode finds the user's DN, then the groups whose member it is", async () => {
    const { b } = make(lookup({ "auth.ldap.activedirectory": true, "auth.ldap.accountattributename": "uid", "auth.ldap.persontype": "person", "auth.ldap.groupclass": "groupOfNames" }));
    assert.deepEqual(await b.groups!({ username: "alice", password: "alice-pw" }), ["devs"]);
    assert.deepEqual(await b.groups!({ username: "carol", password: "carol-pw" }), ["devs"]);
    assert.deepEqual(await b.groups!({ username: "bob", password: "bob-pw" }), []);
  });

  test("FreeIPA mode takes the groups whose member values name the user", async () => {
    const { b } = make(lookup({
      "auth.ldap.freeipa": true,
      "auth.ldap.group_basedn": `ou=Groups,${SUFFIX}`,
      "auth.ldap.group_filter": `(&(objectClass=groupOfNames)(member=uid={{ username }},ou=People,${SUFFIX}))`,
      "auth.ldap.groupattribute": "member",
    }));
    assert.deepEqual(await b.groups!({ username: "carol", password: "carol-pw" }), ["devs"]);
    assert.deepEqual(await b.groups!({ username: "bob", password: "bob-pw" }), []);
  });

  test("process_acl turns an ldap(...) target into one entry per computer under it, domains stripped", async () => {
    const { b } = make(lookup({ "auth.ldap.minion_stripdomains": [".example.org"] }));
    const out = await b.processAcl!(["test.ping", { "web*": ["test.ping"] }, { [`ldap('ou=Computers,${SUFFIX}')`]: ["test.echo"] }]);
    assert.deepEqual(out.slice(0, 2), ["test.ping", { "web*": ["test.ping"] }]);
    const expanded = (out.slice(2) as Record<string, unknown>[]).map((e) => Object.keys(e)[0]).sort();
    assert.deepEqual(expanded, ["db1", "web1", "web2"]);
    for (const e of out.slice(2)) assert.deepEqual(Object.values(e as object)[0], ["test.echo"]);
    const plain = ["test.ping", { "*": [".*"] }];
    assert.equal(await b.processAcl!(plain), plain, "no ldap(...) target: the list as it was");
  });

  test("process_acl without a lookup account drops ldap(...) targets with a log line", async () => {
    const { b, log } = make(template());
    assert.deepEqual(await b.processAcl!([{ [`ldap(ou=Computers,${SUFFIX})`]: ["test.echo"] }, { db1: ["x"] }]), [{ db1: ["x"] }]);
    assert.ok(log.saw("ldap(...) targets dropped", "error"));
  });

  const tlsSkip = () => (slapd.tlsPort === undefined ? "openssl could not make a certificate for slapd" : undefined);

  test("over ldaps:// (auth.ldap.tls) a user binds when the server's certificate is trusted through auth.ldap.ca_file", async (t) => {
    if (tlsSkip()) return t.skip(tlsSkip());
    const { b } = make(template({ "auth.ldap.port": slapd.tlsPort, "auth.ldap.tls": true, "auth.ldap.ca_file": slapd.certFile }));
    assert.equal(await b.authenticate({ username: "alice", password: "alice-pw" }), true);
    assert.equal(await b.authenticate({ username: "alice", password: "bob-pw" }), false);
  });

  test("over ldaps:// a certificate nobody trusts is a backend failure, unless auth.ldap.no_verify", async (t) => {
    if (tlsSkip()) return t.skip(tlsSkip());
    const { b } = make(template({ "auth.ldap.port": slapd.tlsPort, "auth.ldap.tls": true }));
    await assert.rejects(b.authenticate({ username: "alice", password: "alice-pw" }), (e) => isBrineError(e, "EAUTH_BACKEND"));
    const { b: lax } = make(template({ "auth.ldap.port": slapd.tlsPort, "auth.ldap.tls": true, "auth.ldap.no_verify": true }));
    assert.equal(await lax.authenticate({ username: "alice", password: "alice-pw" }), true);
  });

  test("with StartTLS the lookup and the user's bind run over TLS; an untrusted certificate is a backend failure", async (t) => {
    if (tlsSkip()) return t.skip(tlsSkip());
    const { b } = make(lookup({ "auth.ldap.starttls": true, "auth.ldap.ca_file": slapd.certFile }));
    assert.equal(await b.authenticate({ username: "bob", password: "bob-pw" }), true);
    assert.deepEqual(await b.groups!({ username: "bob" }), ["web"]);
    const { b: untrusted } = make(lookup({ "auth.ldap.starttls": true }));
    await assert.rejects(untrusted.authenticate({ username: "bob", password: "bob-pw" }), (e) => isBrineError(e, "EAUTH_BACKEND") && /StartTLS/.test((e as Error).message));
  });

  test("a wrong lookup account password is a backend failure (EAUTH_BACKEND), not a refused user", async () => {
    const { b } = make(lookup({ "auth.ldap.bindpw": "not-it" }));
    await assert.rejects(b.authenticate({ username: "alice", password: "alice-pw" }), (e) => isBrineError(e, "EAUTH_BACKEND") && /lookup account/.test((e as Error).message));
  });

  for (const v of BAD_CREDENTIALS) {
    test(`the ldap backend refuses ${v.what} with a log line`, async () => {
      const { b, log } = make(template());
      const creds = typeof v.creds.password === "string" ? { ...v.creds, password: v.creds.password.replace(/^secret/, "alice-pw") } : v.creds;
      assert.equal(await b.authenticate(creds), false);
      assert.ok(log.saw("refused", "warning"), JSON.stringify(log.lines));
    });
  }
});

test("an LDAP server that refuses connections is a backend failure (EAUTH_BACKEND)", async () => {
  const port = await freePort();
  const b = makeLdapBackend(cfgWith({ "auth.ldap.uri": `ldap://127.0.0.1:${port}`, "auth.ldap.binddn": "uid={{ username }},dc=x", "auth.ldap.timeout": 2 }), capturingLogger());
  await assert.rejects(b.authenticate({ username: "alice", password: "pw" }), (e) => isBrineError(e, "EAUTH_BACKEND"));
});

test("an LDAP server that accepts and never answers is a backend failure after auth.ldap.timeout", async () => {
  const sockets: net.Socket[] = [];
  const silent = net.createServer((s) => void sockets.push(s));
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", () => r()));
  const port = (silent.address() as net.AddressInfo).port;
  try {
    const b = makeLdapBackend(cfgWith({ "auth.ldap.uri": `ldap://127.0.0.1:${port}`, "auth.ldap.binddn": "uid={{ username }},dc=x", "auth.ldap.timeout": 0.3 }), capturingLogger());
    await assert.rejects(b.authenticate({ username: "alice", password: "pw" }), (e) => isBrineError(e, "EAUTH_BACKEND"));
  } finally {
    for (const s of sockets) s.destroy();
    silent.close();
  }
});

const BAD_OPTIONS: { what: string; opts: Record<string, unknown>; names: string }[] = [
  { what: "no binddn", opts: { "auth.ldap.binddn": undefined }, names: "auth.ldap.binddn" },
  { what: "a bindpw without a filter", opts: { "auth.ldap.bindpw": "pw" }, names: "auth.ldap.filter" },
  { what: "both tls and starttls", opts: { "auth.ldap.tls": true, "auth.ldap.starttls": true }, names: "auth.ldap.starttls" },
  { what: "a port out of range", opts: { "auth.ldap.port": 70000 }, names: "auth.ldap.port" },
  { what: "a uri that is not ldap:// or ldaps://", opts: { "auth.ldap.uri": "http://dir.example.org" }, names: "auth.ldap.uri" },
  { what: "a scope of 3", opts: { "auth.ldap.scope": 3 }, names: "auth.ldap.scope" },
  { what: "an attribute name with filter syntax", opts: { "auth.ldap.accountattributename": "memberUid)(x=*" }, names: "auth.ldap.accountattributename" },
  { what: "a template with other Jinja", opts: { "auth.ldap.binddn": "uid={{ username|upper }},dc=x" }, names: "auth.ldap.binddn" },
  { what: "freeipa without group_filter", opts: { "auth.ldap.freeipa": true, "auth.ldap.group_basedn": "dc=x" }, names: "auth.ldap.group_filter" },
  { what: "a timeout of 0", opts: { "auth.ldap.timeout": 0 }, names: "auth.ldap.timeout" },
  { what: "a ca_file that does not exist", opts: { "auth.ldap.ca_file": "/nonexistent/ca.pem" }, names: "auth.ldap.ca_file" },
  { what: "a ca_file without a PEM certificate", opts: { "auth.ldap.ca_file": "/etc/hostname" }, names: "auth.ldap.ca_file" },
  { what: "tls that is not a boolean", opts: { "auth.ldap.tls": "maybe" }, names: "auth.ldap.tls" },
];

for (const v of BAD_OPTIONS) {
  test(`ldap options with ${v.what} stop the start with CONFIG_INVALID naming the option`, () => {
    const cfg = cfgWith({ "auth.ldap.binddn": "uid={{ username }},dc=x", ...v.opts });
    assert.throws(() => makeLdapBackend(cfg, capturingLogger()), (e) => isBrineError(e, "CONFIG_INVALID") && (e as Error).message.includes(v.names));
  });
}

test("ldap options the master's start checks warn about: no_verify, auth_by_group_membership_only, a binddn without {{ username }} and no bindpw", () => {
  const cfg = cfgWith({ "auth.ldap.binddn": "cn=shared,dc=x", "auth.ldap.no_verify": true, "auth.ldap.auth_by_group_membership_only": true, external_auth: { ldap: {} } });
  const built = capturingLogger();
  makeLdapBackend(cfg, built);
  assert.deepEqual(built.lines, [], "building the backend (in every worker) says nothing");
  const log = capturingLogger();
  warnAboutDangerousBackends(cfg, log);
  assert.ok(log.saw("certificate is not checked", "warning"));
  assert.ok(log.saw("auth_by_group_membership_only is ignored", "warning"));
  assert.ok(log.saw("password of that one DN", "warning"));
  assert.equal(log.lines.length, 3);
});
