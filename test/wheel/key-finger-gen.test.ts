/**
 * key.finger against `salt-key -F` / `-f` (the same fingerprint code, src/lib/pki/key-actions.ts), other hash
 * types, key.gen / key.gen_accept (a key pair Salt's way; the accepted key is what salt-key then lists), and
 * a salt-key run over keys the wheel changed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createPrivateKey, createPublicKey } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { callWheel } from "../../src/lib/wheel/index.js";
import { generateRsaPem } from "../../src/lib/pki/master-keys.js";
import { pemFinger } from "../../src/shared/protocol/pem.js";
import { runCli } from "../helpers/cli.js";
import { makeBed, pubKey, seed } from "./helpers.js";

/** salt-key's finger output as {section title: {name: finger}}. */
function parseFingers(out: string): Record<string, Record<string, string>> {
  const ret: Record<string, Record<string, string>> = {};
  let cur: Record<string, string> | undefined;
  for (const line of out.split("\n").filter(Boolean)) {
    const m = /^(.+?):  ([0-9a-f:]+)$/.exec(line);
    if (m) cur![m[1]] = m[2];
    else ret[line.replace(/:$/, "")] = cur = {};
  }
  return ret;
}
const TITLE: Record<string, string> = { local: "Local Keys", minions: "Accepted Keys", minions_pre: "Unaccepted Keys", minions_rejected: "Rejected Keys", minions_denied: "Denied Keys" };

test("key.finger of every key equals salt-key -F, section by section; a glob equals salt-key -f", async () => {
  const bed = makeBed();
  try {
    mkdirSync(bed.cfg.pki_dir, { recursive: true });
    const mk = generateRsaPem(1024);
    writeFileSync(path.join(bed.cfg.pki_dir, "master.pem"), mk.privatePem);
    writeFileSync(path.join(bed.cfg.pki_dir, "master.pub"), mk.publicPem);
    seed(bed, { accepted: ["a1", "a2"], pending: ["p1"], rejected: ["r1"], denied: ["d1"] });
    const wheel = (await callWheel(bed.ctx, "key.finger", ["*"], {})).return as Record<string, Record<string, string>>;
    const cli = await runCli("salt-key", ["-c", bed.confDir, "-F"]);
    assert.equal(cli.code, 0, cli.stderr);
    const fromCli = parseFingers(cli.stdout);
    assert.deepEqual(Object.fromEntries(Object.entries(wheel).map(([dir, v]) => [TITLE[dir], v])), fromCli);
    assert.equal(wheel.minions.a1, pemFinger(pubKey(0)));
    assert.equal(wheel.local["master.pub"], pemFinger(mk.publicPem));

    const one = await callWheel(bed.ctx, "key.finger", ["a*"], {});
    const cliOne = parseFingers((await runCli("salt-key", ["-c", bed.confDir, "-f", "a*"])).stdout);
    assert.deepEqual(one.return, { minions: cliOne["Accepted Keys"] });
    // a glob that names a local key file: Salt's name_match(full=True) includes it
    assert.deepEqual(Object.keys((await callWheel(bed.ctx, "key.finger", ["master.pub"], {})).return as object), ["local"]);
  } finally {
    bed.cleanup();
  }
});

test("key.finger with hash_type md5 and the master's hash_type by default; an unknown hash type fails the call", async () => {
  const bed = makeBed({ hash_type: "sha512" });
  try {
    seed(bed, { accepted: ["m1"] });
    assert.deepEqual((await callWheel(bed.ctx, "key.finger", ["m1"], {})).return, { minions: { m1: pemFinger(pubKey(0), "sha512") } });
    assert.deepEqual((await callWheel(bed.ctx, "key.finger", ["m1", "md5"], {})).return, { minions: { m1: pemFinger(pubKey(0), "md5") } });
    const bad = await callWheel(bed.ctx, "key.finger", ["m1"], { hash_type: "nope" });
    assert.equal(bad.success, false);
    assert.match(String(bad.return), /^Exception occurred in wheel key\.finger: ValueError: /);
  } finally {
    bed.cleanup();
  }
});

test("gen_accept writes the public key as accepted (salt-key lists it) and returns the pair; a second call without force returns {}", async () => {
  const bed = makeBed();
  try {
    const r = await callWheel(bed.ctx, "key.gen_accept", ["new-minion"], {});
    assert.equal(r.success, true);
    const pair = r.return as { priv: string; pub: string };
    assert.deepEqual(Object.keys(pair), ["priv", "pub"]);
    assert.match(pair.priv, /^-----BEGIN RSA PRIVATE KEY-----\n/);
    assert.match(pair.pub, /^-----BEGIN PUBLIC KEY-----\n/);
    assert.equal(createPublicKey(createPrivateKey(pair.priv)).export({ type: "spki", format: "pem" }), pair.pub);
    assert.equal(createPublicKey(pair.pub).asymmetricKeyDetails?.modulusLength, 2048);
    assert.equal(bed.keys.read("accepted", "new-minion"), pair.pub);
    assert.deepEqual(bed.notes, ["accept:new-minion"]);
    assert.deepEqual(bed.fired, [{ tag: "salt/key", data: { result: true, act: "accept", id: "new-minion" } }]);
    const listed = await runCli("salt-key", ["-c", bed.confDir, "-L", "--out", "json"]);
    assert.deepEqual(JSON.parse(listed.stdout), { minions: ["new-minion"], minions_denied: [], minions_pre: [], minions_rejected: [] });

    assert.deepEqual((await callWheel(bed.ctx, "key.gen_accept", ["new-minion"], {})).return, {});
    assert.equal(bed.keys.read("accepted", "new-minion"), pair.pub);
    const forced = await callWheel(bed.ctx, "key.gen_accept", [], { id_: "new-minion", keysize: 1024, force: true });
    assert.notEqual((forced.return as { pub: string }).pub, pair.pub);
    assert.equal(bed.keys.read("accepted", "new-minion"), (forced.return as { pub: string }).pub);
  } finally {
    bed.cleanup();
  }
});

test("gen_accept cleans the id as Salt's clean.id does and refuses one with nothing left; keysize out of bounds fails", async () => {
  const bed = makeBed();
  try {
    const r = await callWheel(bed.ctx, "key.gen_accept", ["../evil/.x_y"], { keysize: "1024" });
    assert.equal(r.success, true);
    assert.deepEqual(bed.keys.list("accepted"), ["evil.xy"]);
    assert.deepEqual(await callWheel(bed.ctx, "key.gen_accept", ["///"], {}), {
      success: false,
      return: "Exception occurred in wheel key.gen_accept: CommandExecutionError: Empty value during sanitation",
    });
    const big = await callWheel(bed.ctx, "key.gen_accept", ["big"], { keysize: 65536 });
    assert.equal(big.success, false);
    assert.match(String(big.return), /ValueError: key_size must be at most 8192-bits/);
    const small = await callWheel(bed.ctx, "key.gen", [], { keysize: 512 });
    assert.match(String(small.return), /ValueError: key_size must be at least 1024-bits\./);
    assert.deepEqual(bed.keys.list("accepted"), ["evil.xy"]);
  } finally {
    bed.cleanup();
  }
});

test("gen returns a fresh pair and writes nothing to the pki dir", async () => {
  const bed = makeBed();
  try {
    const before = (await callWheel(bed.ctx, "key.list_all", [], {})).return;
    const r = await callWheel(bed.ctx, "key.gen", ["master"], { keysize: 1024 });
    assert.match((r.return as { priv: string }).priv, /BEGIN RSA PRIVATE KEY/);
    assert.deepEqual((await callWheel(bed.ctx, "key.list_all", [], {})).return, before);
    assert.deepEqual(bed.notes, []);
  } finally {
    bed.cleanup();
  }
});

test("salt-key sees what the wheel did: a key accepted by the wheel is listed accepted, one deleted is gone", async () => {
  const bed = makeBed();
  try {
    seed(bed, { pending: ["w1", "w2"] });
    await callWheel(bed.ctx, "key.accept", ["w1"], {});
    await callWheel(bed.ctx, "key.delete", ["w2"], {});
    const listed = await runCli("salt-key", ["-c", bed.confDir, "-L", "--out", "json"]);
    assert.deepEqual(JSON.parse(listed.stdout), { minions: ["w1"], minions_denied: [], minions_pre: [], minions_rejected: [] });
  } finally {
    bed.cleanup();
  }
});
