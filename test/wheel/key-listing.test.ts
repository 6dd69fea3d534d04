/**
 * key.list_all, key.list, key.name_match, key.print: Salt's shapes (every directory in list_all plus the
 * master's own key files under "local", case-insensitive order, globs, comma lists and lists of globs), and
 * keys read from cluster_pki_dir when the master is clustered.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import { callWheel } from "../../src/lib/wheel/index.js";
import { generateRsaPem } from "../../src/lib/pki/master-keys.js";
import { makeBed, pubKey, seed } from "./helpers.js";

function masterKeys(dir: string, name = "master"): void {
  mkdirSync(dir, { recursive: true });
  const { privatePem, publicPem } = generateRsaPem(1024);
  writeFileSync(path.join(dir, `${name}.pem`), privatePem);
  writeFileSync(path.join(dir, `${name}.pub`), publicPem);
}

test("list_all lists every directory, sorted ignoring case, with the master's key files as local", async () => {
  const bed = makeBed();
  try {
    masterKeys(bed.cfg.pki_dir);
    seed(bed, { accepted: ["web2", "Web1", "db"], pending: ["new"], denied: ["evil"] });
    const r = await callWheel(bed.ctx, "key.list_all", [], {});
    assert.deepEqual(r, {
      success: true,
      return: { minions: ["db", "Web1", "web2"], minions_pre: ["new"], minions_rejected: [], minions_denied: ["evil"], local: ["master.pem", "master.pub"] },
    });
  } finally {
    bed.cleanup();
  }
});

test("list takes Salt's state words; an unknown word lists nothing; all is list_all", async () => {
  const bed = makeBed();
  try {
    seed(bed, { accepted: ["a1"], pending: ["p1"], rejected: ["r1"], denied: ["d1"] });
    const list = async (m: unknown) => (await callWheel(bed.ctx, "key.list", [m], {})).return;
    assert.deepEqual(await list("accepted"), { minions: ["a1"] });
    assert.deepEqual(await list("acc"), { minions: ["a1"] });
    assert.deepEqual(await list("pre"), { minions_pre: ["p1"] });
    assert.deepEqual(await list("un"), { minions_pre: ["p1"] });
    assert.deepEqual(await list("unaccepted"), { minions_pre: ["p1"] });
    assert.deepEqual(await list("rejected"), { minions_rejected: ["r1"] });
    assert.deepEqual(await list("den"), { minions_denied: ["d1"] });
    assert.deepEqual(await list("bogus"), {});
    assert.deepEqual(await list("all"), (await callWheel(bed.ctx, "key.list_all", [], {})).return);
    const missing = await callWheel(bed.ctx, "key.list", [], {});
    assert.deepEqual(missing, { success: false, return: "Exception occurred in wheel key.list: SaltInvocationError: list_ takes at least 1 argument (0 given)" });
  } finally {
    bed.cleanup();
  }
});

test("name_match takes a glob, comma-separated globs or a list of globs, and reports only directories with a match", async () => {
  const bed = makeBed();
  try {
    seed(bed, { accepted: ["web1", "web2", "db1"], pending: ["web3"], rejected: ["mail"] });
    const nm = async (m: unknown) => (await callWheel(bed.ctx, "key.name_match", [m], {})).return;
    assert.deepEqual(await nm("web*"), { minions: ["web1", "web2"], minions_pre: ["web3"] });
    assert.deepEqual(await nm("db1,mail"), { minions: ["db1"], minions_rejected: ["mail"] });
    assert.deepEqual(await nm(["web[13]", "mail"]), { minions: ["web1"], minions_pre: ["web3"], minions_rejected: ["mail"] });
    assert.deepEqual(await nm("nothing*"), {});
    const bad = await callWheel(bed.ctx, "key.name_match", [5], {});
    assert.equal(bad.success, false);
    assert.match(String(bad.return), /^Exception occurred in wheel key\.name_match: TypeError: match must be a string or a list of strings/);
  } finally {
    bed.cleanup();
  }
});

test("print returns the matching public keys by directory", async () => {
  const bed = makeBed();
  try {
    seed(bed, { accepted: ["m1"], pending: ["m2"] });
    const r = await callWheel(bed.ctx, "key.print", ["m*"], {});
    assert.deepEqual(r.return, { minions: { m1: pubKey(0) }, minions_pre: { m2: pubKey(1) } });
  } finally {
    bed.cleanup();
  }
});

test("clustered, minion keys and local keys come from cluster_pki_dir as salt-key's do", async () => {
  const clustered = makeBed((root) => ({ cluster_id: "c1", cluster_peers: [], cluster_pki_dir: path.join(root, "cluster-pki") }));
  const shared = path.join(clustered.root, "cluster-pki");
  try {
    masterKeys(shared, "cluster");
    masterKeys(clustered.cfg.pki_dir);
    seed(clustered, { pending: ["cm1"] });
    const r = await callWheel(clustered.ctx, "key.list_all", [], {});
    assert.deepEqual(r.return, {
      minions: [],
      minions_pre: ["cm1"],
      minions_rejected: [],
      minions_denied: [],
      local: ["cluster.pem", "cluster.pub", "master.pem", "master.pub"],
    });
    const acc = await callWheel(clustered.ctx, "key.accept", ["cm1"], {});
    assert.deepEqual(acc.return, { minions: ["cm1"] });
    assert.ok(clustered.keys.exists("accepted", "cm1"));
    assert.equal(clustered.keys.pkiDir, shared);
  } finally {
    clustered.cleanup();
  }
});
