/**
 * config.values without secrets (even when the configuration has them), minions.connected, and the
 * file_roots functions: Salt's shapes, unknown environments, paths that leave their root (.., absolute,
 * symlinks) and text/binary detection.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { callWheel } from "../../src/lib/wheel/index.js";
import { isSecretOption } from "../../src/lib/wheel/config.js";
import { makeBed, pubKey } from "./helpers.js";

test("config.values returns the master's options without passwords, tokens, shared secrets, key material or external_auth", async () => {
  const bed = makeBed({
    sharedsecret: "s3cr3t-shared",
    external_auth: { pam: { alice: ["test.*"] }, file: { "^filename": "/etc/salt/htpasswd" } },
    "auth.ldap.bindpw": "ldap-pw",
    "auth.ldap.binddn": "cn=admin",
    signing_key_pass: "sign-pass",
    rest_cherrypy: { port: 8000, api_key: "k-123", nested: { password: "inner-pw", keep: 1 } },
    my_custom_blob: pubKey(0),
    list_of_things: ["fine", "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----"],
    token_expire: 43200,
    token_expire_user_override: { fred: true },
    keep_acl_in_token: true,
    cluster_secret: "cs",
  });
  try {
    const r = await callWheel(bed.ctx, "config.values", [], {});
    assert.equal(r.success, true);
    const v = r.return as Record<string, unknown>;
    const text = JSON.stringify(v);
    for (const secret of ["s3cr3t-shared", "ldap-pw", "sign-pass", "k-123", "inner-pw", "BEGIN", "alice", "htpasswd", '"cs"']) {
      assert.ok(!text.includes(secret), `${secret} leaked`);
    }
    for (const gone of ["sharedsecret", "external_auth", "auth.ldap.bindpw", "signing_key_pass", "my_custom_blob", "cluster_secret"]) assert.ok(!(gone in v), gone);
    assert.equal(v["auth.ldap.binddn"], "cn=admin");
    assert.deepEqual(v.rest_cherrypy, { port: 8000, nested: { keep: 1 } });
    assert.deepEqual(v.list_of_things, ["fine"]);
    assert.equal(v.token_expire, 43200);
    assert.equal(v.keep_acl_in_token, true);
    assert.deepEqual(v.token_expire_user_override, { fred: true });
    assert.equal(v.id, "wheel-master");
    assert.equal(v.hash_type, "sha256");
    assert.equal(v.rotate_aes_key, true);
    assert.equal(v.pki_dir, bed.cfg.pki_dir);
    assert.equal(bed.cfg.sharedsecret, "s3cr3t-shared", "the running config is not changed");
  } finally {
    bed.cleanup();
  }
});

test("secret option names are recognised by their words, not by substrings", () => {
  for (const n of ["password", "db_password", "auth.ldap.bindpw", "sharedsecret", "token", "api_key", "aes_key", "private_key", "signing_key_pass", "x-secret-y"]) assert.ok(isSecretOption(n), n);
  for (const n of ["keysize", "hash_type", "token_expire", "rotate_aes_key", "master_sign_key_name", "passthrough", "publish_session", "saltenv", "bypass_x"]) assert.ok(!isSecretOption(n), n);
});

test("minions.connected is the sorted, distinct ids the master counts as connected", async () => {
  const bed = makeBed();
  try {
    bed.connected.push("m2", "m1", "m2");
    assert.deepEqual(await callWheel(bed.ctx, "minions.connected", [], {}), { success: true, return: ["m1", "m2"] });
  } finally {
    bed.cleanup();
  }
});

test("file_roots.list_roots / list_env: every environment's tree as nested dicts, files as \"f\"; a symlinked directory is listed, not entered", async () => {
  const bed = makeBed((root) => ({ file_roots: { base: [path.join(root, "srv", "salt")], dev: [path.join(root, "srv", "dev"), path.join(root, "srv", "missing")] } }));
  try {
    const base = path.join(bed.root, "srv", "salt");
    mkdirSync(path.join(base, "web", "files"), { recursive: true });
    writeFileSync(path.join(base, "top.sls"), "base: {}\n");
    writeFileSync(path.join(base, "web", "init.sls"), "x: y\n");
    mkdirSync(path.join(bed.root, "srv", "dev"), { recursive: true });
    writeFileSync(path.join(bed.root, "srv", "dev", "a.sls"), "");
    symlinkSync(path.join(base, "web"), path.join(bed.root, "srv", "dev", "weblink"));
    const roots = await callWheel(bed.ctx, "file_roots.list_roots", [], {});
    assert.deepEqual(roots.return, {
      base: [{ [base]: { "top.sls": "f", web: { files: {}, "init.sls": "f" } } }],
      dev: [{ [path.join(bed.root, "srv", "dev")]: { "a.sls": "f", weblink: {} }, [path.join(bed.root, "srv", "missing")]: {} }],
    });
    assert.deepEqual((await callWheel(bed.ctx, "file_roots.list_env", ["nope"], {})).return, {});
    assert.deepEqual((await callWheel(bed.ctx, "file_roots.list_env", [], {})).return, (roots.return as Record<string, unknown[]>).base[0]);
  } finally {
    bed.cleanup();
  }
});

test("file_roots.find / read: text and binary files inside a root; .., absolute paths and symlinks out of the root find nothing", async () => {
  const bed = makeBed();
  try {
    const base = bed.cfg.file_roots.base[0];
    mkdirSync(base, { recursive: true });
    writeFileSync(path.join(base, "motd"), "hello\n");
    writeFileSync(path.join(base, "blob"), Buffer.from([0x7f, 0x45, 0x00, 0x01]));
    writeFileSync(path.join(bed.root, "secret.txt"), "outside\n");
    symlinkSync(path.join(bed.root, "secret.txt"), path.join(base, "escape"));
    const find = async (p: string) => (await callWheel(bed.ctx, "file_roots.find", [p], {})).return;
    assert.deepEqual(await find("motd"), [{ [path.join(base, "motd")]: "txt" }]);
    assert.deepEqual(await find("blob"), [{ [path.join(base, "blob")]: "bin" }]);
    assert.deepEqual(await find("../secret.txt"), []);
    assert.deepEqual(await find(path.join(bed.root, "secret.txt")), []);
    assert.deepEqual(await find("escape"), []);
    assert.deepEqual(await find("nothing"), []);
    assert.deepEqual((await callWheel(bed.ctx, "file_roots.find", ["motd"], { saltenv: "nope" })).return, []);
    assert.deepEqual((await callWheel(bed.ctx, "file_roots.read", ["motd"], {})).return, [{ [path.join(base, "motd")]: "hello\n" }]);
    assert.deepEqual((await callWheel(bed.ctx, "file_roots.read", ["blob"], {})).return, []);
    assert.deepEqual((await callWheel(bed.ctx, "file_roots.read", ["../secret.txt"], {})).return, []);
  } finally {
    bed.cleanup();
  }
});

test("pillar_roots has the same read functions over pillar_roots, with the same root check", async () => {
  const bed = makeBed((root) => ({ pillar_roots: { base: [path.join(root, "srv", "pillar")] } }));
  try {
    const base = path.join(bed.root, "srv", "pillar");
    mkdirSync(base, { recursive: true });
    writeFileSync(path.join(base, "top.sls"), "base: {}\n");
    writeFileSync(path.join(bed.root, "outside.sls"), "x\n");
    assert.deepEqual((await callWheel(bed.ctx, "pillar_roots.list_roots", [], {})).return, { base: [{ [base]: { "top.sls": "f" } }] });
    assert.deepEqual((await callWheel(bed.ctx, "pillar_roots.read", ["top.sls"], {})).return, [{ [path.join(base, "top.sls")]: "base: {}\n" }]);
    assert.deepEqual((await callWheel(bed.ctx, "pillar_roots.find", ["../outside.sls"], {})).return, []);
  } finally {
    bed.cleanup();
  }
});
