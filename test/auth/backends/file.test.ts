/**
 * The `file` eauth backend (Salt's salt/auth/file.py): text files with plaintext or hashed passwords,
 * Apache htpasswd (bcrypt, apr1, MD5/SHA-crypt, {SHA}; unsupported schemes refused with a warning) and
 * htdigest files, re-read when they change; options validated at start; bad input refused with a log line.
 *
 * Hash vectors come from other implementations than ours: `openssl passwd -apr1/-1/-5/-6` (OpenSSL 3.0),
 * glibc crypt(3) through Python's crypt module (the "rounds=" and long-password cases), Ulrich Drepper's
 * specification (the "Hello world!" cases).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, utimesSync, rmSync } from "node:fs";
import { createHash } from "node:crypto";
import os from "node:os";
import path from "node:path";
import bcrypt from "bcryptjs";
import { makeFileBackend } from "../../../src/lib/auth/backends/file.js";
import { isBrineError } from "../../../src/shared/errors.js";
import { BAD_CREDENTIALS, capturingLogger, cfgWith } from "./helpers.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "brine-eauth-file-"));
process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
let seq = 0;
function userFile(text: string): string {
  const f = path.join(dir, `users-${++seq}`);
  writeFileSync(f, text);
  return f;
}
function backend(opts: Record<string, unknown>, users: string) {
  const log = capturingLogger();
  const fileOpts = { "^filename": userFile(users), ...opts };
  const b = makeFileBackend(cfgWith({ external_auth: { file: { ...fileOpts, alice: [".*"] } } }), log);
  return { b, log, filename: fileOpts["^filename"] as string };
}
const hex = (algo: string, s: string) => createHash(algo).update(s).digest("hex");

test("a plaintext text entry accepts its password and refuses another", async () => {
  const { b } = backend({}, "dean:goneFishing\ngene:OceanMan\n");
  assert.equal(await b.authenticate({ username: "dean", password: "goneFishing" }), true);
  assert.equal(await b.authenticate({ username: "gene", password: "OceanMan" }), true);
  assert.equal(await b.authenticate({ username: "dean", password: "OceanMan" }), false);
  assert.equal(await b.authenticate({ username: "dean", password: "gonefishing" }), false);
  assert.equal(await b.authenticate({ username: "nobody", password: "goneFishing" }), false);
});

test("a legacy text file with a separator, numbered fields and md5 digests works as Salt's documented example", async () => {
  const users = [`46|trey|${hex("md5", "fish")}`, `555|mike|${hex("md5", "gordon")}`, ""].join("\n");
  const { b } = backend({ "^hashtype": "md5", "^username_field": 2, "^password_field": "3", "^field_separator": "|" }, users);
  assert.equal(await b.authenticate({ username: "trey", password: "fish" }), true);
  assert.equal(await b.authenticate({ username: "mike", password: "gordon" }), true);
  assert.equal(await b.authenticate({ username: "trey", password: "gordon" }), false);
  assert.equal(await b.authenticate({ username: "46", password: "fish" }), false, "the id field is not a username");
});

for (const algo of ["sha1", "sha256", "sha512"]) {
  test(`a text entry hashed with ${algo} accepts its password (upper- or lower-case hex) and refuses another`, async () => {
    const { b } = backend({ "^hashtype": algo }, `ann:${hex(algo, "pässwörd")}\nbea:${hex(algo, "x y").toUpperCase()}\n`);
    assert.equal(await b.authenticate({ username: "ann", password: "pässwörd" }), true);
    assert.equal(await b.authenticate({ username: "bea", password: "x y" }), true);
    assert.equal(await b.authenticate({ username: "ann", password: "passwort" }), false);
    assert.equal(await b.authenticate({ username: "ann", password: hex(algo, "pässwörd") }), false, "the digest itself is not the password");
  });
}

test("in a text file the first line naming a user decides, as in Salt", async () => {
  const { b } = backend({}, "dean:first\ndean:second\n");
  assert.equal(await b.authenticate({ username: "dean", password: "first" }), true);
  assert.equal(await b.authenticate({ username: "dean", password: "second" }), false);
});

test("a text line with too few fields is skipped with a warning and the other users still log in", async () => {
  const { b, log } = backend({}, "justaname\n\ndean:goneFishing\n");
  assert.equal(await b.authenticate({ username: "dean", password: "goneFishing" }), true);
  assert.equal(await b.authenticate({ username: "justaname", password: "justaname" }), false);
  assert.ok(log.saw("line 1 has 1 fields", "warning"), JSON.stringify(log.lines));
});

const BCRYPT = bcrypt.hashSync("b-pass", 4);
const HTPASSWD_OK: { scheme: string; hash: string; password: string }[] = [
  { scheme: "bcrypt $2y$ (Apache's htpasswd -B)", hash: BCRYPT.replace(/^\$2[ab]\$/, "$2y$"), password: "b-pass" },
  { scheme: "bcrypt $2a$", hash: BCRYPT.replace(/^\$2[ab]\$/, "$2a$"), password: "b-pass" },
  { scheme: "bcrypt $2b$", hash: BCRYPT.replace(/^\$2[ab]\$/, "$2b$"), password: "b-pass" },
  { scheme: "apr1", hash: "$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/", password: "secret" },
  { scheme: "md5-crypt", hash: "$1$abcdefgh$cHJi5PXp/ki/ktXzqlk6I1", password: "secret" },
  { scheme: "md5-crypt with a non-ASCII password", hash: "$1$salt1234$VwTk0ScCcREDNl.8aCJCc0", password: "pässwörd" },
  { scheme: "sha256-crypt", hash: "$5$saltsalt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA", password: "secret" },
  { scheme: "sha256-crypt (Drepper's vector)", hash: "$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5", password: "Hello world!" },
  { scheme: "sha256-crypt with rounds and a salt cut to 16", hash: "$5$rounds=10000$saltstringsaltst$3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA", password: "Hello world!" },
  {
    scheme: "sha256-crypt with a password longer than the digest",
    hash: "$5$rounds=1000$shortsalt$jU6Ljj9eXtrxLT7.uVt3i4rMA6Ub3.kK5ItHYjvOKiD",
    password: "a much longer password than sixty four bytes, to cross the block size of sha two five six",
  },
  { scheme: "sha512-crypt", hash: "$6$saltsalt$TVLlQcbpFVof5W3Yz4DTP6gRstiNuHwwTt6GLc1E5n0U0aDehy0S5knV8wiOQSpT0Y77vwPZN.Pq.H91p5hVO1", password: "secret" },
  { scheme: "sha512-crypt (Drepper's vector)", hash: "$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1", password: "Hello world!" },
  {
    scheme: "sha512-crypt with rounds and a long password",
    hash: "$6$rounds=1000$shortsalt$kogoHGN7AqRfvMAk80/caX0nX.aPzugMldX0IzeAj93h82SlsoxL9cr2zsmFR7mngZ535dva554FWsZ564qYe.",
    password: "a much longer password than sixty four bytes, to cross the block size of sha two five six and sha512 too ok",
  },
  { scheme: "{SHA} (htpasswd -s; vector: openssl sha1 | base64)", hash: "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", password: "password" },
];

for (const v of HTPASSWD_OK) {
  test(`an htpasswd ${v.scheme} entry accepts its password and refuses another`, async () => {
    const { b, log } = backend({ "^filetype": "htpasswd" }, `# a comment\nother:$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/\ncory:${v.hash}\n`);
    assert.equal(await b.authenticate({ username: "cory", password: v.password }), true);
    assert.equal(await b.authenticate({ username: "cory", password: v.password + "x" }), false);
    assert.equal(await b.authenticate({ username: "cory", password: v.password.slice(0, -1) }), false);
    assert.equal(await b.authenticate({ username: "other", password: v.password === "secret" ? "Secret" : v.password }), false);
    assert.ok(!log.saw("", "warning"), JSON.stringify(log.lines));
  });
}

const HTPASSWD_UNSUPPORTED: { scheme: string; hash: string; password: string; warn: RegExp }[] = [
  { scheme: "traditional DES crypt", hash: "abJnggxhB/yWI", password: "secret", warn: /des-crypt.*not supported/ },
  { scheme: "a plaintext password", hash: "secret", password: "secret", warn: /plaintext passwords are not accepted/ },
  { scheme: "an unknown $id$", hash: "$7$CU..../....abc$def", password: "secret", warn: /unknown crypt scheme/ },
  { scheme: "sha512-crypt with an absurd number of rounds", hash: "$6$rounds=999999999$saltsalt$abc", password: "secret", warn: /exceeds/ },
];

for (const v of HTPASSWD_UNSUPPORTED) {
  test(`an htpasswd entry with ${v.scheme} is refused with a warning, never accepted`, async () => {
    const { b, log } = backend({ "^filetype": "htpasswd" }, `cory:${v.hash}\n`);
    assert.equal(await b.authenticate({ username: "cory", password: v.password }), false);
    assert.ok(log.saw(v.warn, "warning"), JSON.stringify(log.lines));
    assert.ok(log.saw(/user "cory" refused/, "warning"), "each refused attempt says why");
  });
}

test("an htdigest entry accepts its password in the configured realm only", async () => {
  const line = (u: string, r: string, p: string) => `${u}:${r}:${hex("md5", `${u}:${r}:${p}`)}`;
  const users = [line("cory", "Other", "elsewhere"), line("cory", "MySecureRealm", "digest-pw"), line("dora", "Other", "dora-pw"), ""].join("\n");
  const { b } = backend({ "^filetype": "htdigest", "^realm": "MySecureRealm" }, users);
  assert.equal(await b.authenticate({ username: "cory", password: "digest-pw" }), true);
  assert.equal(await b.authenticate({ username: "cory", password: "elsewhere" }), false, "another realm's password");
  assert.equal(await b.authenticate({ username: "dora", password: "dora-pw" }), false, "a user of another realm only");
});

test("the user file is read again when it changes, and not before", async () => {
  const { b, filename, log } = backend({}, "dean:old\n");
  assert.equal(await b.authenticate({ username: "dean", password: "old" }), true);
  writeFileSync(filename, "dean:new\n");
  const later = new Date(Date.now() + 5000);
  utimesSync(filename, later, later);
  assert.equal(await b.authenticate({ username: "dean", password: "new" }), true);
  assert.equal(await b.authenticate({ username: "dean", password: "old" }), false);
  const reads = log.lines.filter((l) => l.msg.includes("read 1 users")).length;
  assert.equal(await b.authenticate({ username: "dean", password: "new" }), true);
  assert.equal(log.lines.filter((l) => l.msg.includes("read 1 users")).length, reads, "unchanged file: not read again");
});

test("a user file removed after start fails the backend (EAUTH_BACKEND), it does not log anyone in", async () => {
  const { b, filename } = backend({}, "dean:pw\n");
  rmSync(filename);
  await assert.rejects(b.authenticate({ username: "dean", password: "pw" }), (e) => isBrineError(e, "EAUTH_BACKEND"));
});

for (const v of BAD_CREDENTIALS) {
  test(`the file backend refuses ${v.what} with a log line`, async () => {
    const { b, log } = backend({}, "alice:secret\nalice\u0000:x\n");
    assert.equal(await b.authenticate(v.creds), false);
    assert.ok(log.saw("refused", "warning"), JSON.stringify(log.lines));
  });
}

const BAD_OPTIONS: { what: string; opts: Record<string, unknown>; names: string }[] = [
  { what: "no ^filename", opts: { "^filename": undefined }, names: "^filename" },
  { what: "a ^filename that does not exist", opts: { "^filename": "/nonexistent/brine-users" }, names: "^filename" },
  { what: "an unknown ^filetype", opts: { "^filetype": "csv" }, names: "^filetype" },
  { what: "an unknown ^hashtype", opts: { "^hashtype": "md4" }, names: "^hashtype" },
  { what: "a ^username_field that is not a number", opts: { "^username_field": "first" }, names: "^username_field" },
  { what: "a ^password_field of 0", opts: { "^password_field": 0 }, names: "^password_field" },
  { what: "an empty ^field_separator", opts: { "^field_separator": "" }, names: "^field_separator" },
  { what: "htdigest without ^realm", opts: { "^filetype": "htdigest" }, names: "^realm" },
];

for (const v of BAD_OPTIONS) {
  test(`file options with ${v.what} stop the start with CONFIG_INVALID naming the option`, () => {
    assert.throws(() => backend(v.opts, "alice:secret\n"), (e) => isBrineError(e, "CONFIG_INVALID") && (e as Error).message.includes(v.names));
  });
}
