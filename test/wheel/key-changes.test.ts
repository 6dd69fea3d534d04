/**
 * key.accept / reject / delete and their _dict variants across key states: which directories each looks in
 * (include_rejected, include_accepted, include_denied), Salt's return (where the matched keys are now), the
 * salt/key event and the note for every key changed and for no other, the AES rotation drop file on delete
 * and reject, and dict requests that name a directory or id outside the pki dir.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { callWheel } from "../../src/lib/wheel/index.js";
import { makeBed, seed } from "./helpers.js";

const dfnOf = (cachedir: string) => path.join(cachedir, ".dfn");

test("accept takes pending keys only unless include_rejected / include_denied; each accepted key fires salt/key and is noted", async () => {
  const bed = makeBed();
  try {
    seed(bed, { pending: ["web1"], rejected: ["web2"], denied: ["web3"], accepted: ["web4"] });
    const r1 = await callWheel(bed.ctx, "key.accept", ["web*"], {});
    assert.deepEqual(r1, { success: true, return: { minions: ["web1", "web4"], minions_rejected: ["web2"], minions_denied: ["web3"] } });
    assert.deepEqual(bed.notes, ["accept:web1"]);
    assert.deepEqual(bed.fired, [{ tag: "salt/key", data: { result: true, act: "accept", id: "web1" } }]);
    const r2 = await callWheel(bed.ctx, "key.accept", [], { match: "web*", include_rejected: true });
    assert.deepEqual(r2.return, { minions: ["web1", "web2", "web4"], minions_denied: ["web3"] });
    const r3 = await callWheel(bed.ctx, "key.accept", ["web*", false, true], {});
    assert.deepEqual(r3.return, { minions: ["web1", "web2", "web3", "web4"] });
    assert.deepEqual(bed.notes, ["accept:web1", "accept:web2", "accept:web3"]);
    assert.ok(!existsSync(dfnOf(bed.cfg.cachedir)), "accepting never asks for an AES rotation");
  } finally {
    bed.cleanup();
  }
});

test("include flags follow Python truth: the string \"False\" is true, empty string and 0 are false", async () => {
  const bed = makeBed();
  try {
    seed(bed, { rejected: ["r1"] });
    await callWheel(bed.ctx, "key.accept", ["r1"], { include_rejected: "" });
    assert.ok(bed.keys.exists("rejected", "r1"));
    await callWheel(bed.ctx, "key.accept", ["r1"], { include_rejected: 0 });
    assert.ok(bed.keys.exists("rejected", "r1"));
    await callWheel(bed.ctx, "key.accept", ["r1"], { include_rejected: "False" });
    assert.ok(bed.keys.exists("accepted", "r1"));
  } finally {
    bed.cleanup();
  }
});

test("accept leaves a pending key that is not an RSA public key where it is", async () => {
  const bed = makeBed();
  try {
    seed(bed, { pending: ["good"] });
    writeFileSync(path.join(bed.keys.pkiDir, "minions_pre", "junk"), "not a key\n");
    const r = await callWheel(bed.ctx, "key.accept", ["*"], {});
    assert.deepEqual(r.return, { minions: ["good"], minions_pre: ["junk"] });
    assert.deepEqual(bed.notes, ["accept:good"]);
  } finally {
    bed.cleanup();
  }
});

test("reject takes pending keys, accepted ones with include_accepted, denied ones with include_denied; a rejection writes the drop file", async () => {
  const bed = makeBed();
  try {
    seed(bed, { pending: ["m1"], accepted: ["m2"], denied: ["m3"] });
    const r1 = await callWheel(bed.ctx, "key.reject", ["m*"], {});
    assert.deepEqual(r1.return, { minions: ["m2"], minions_rejected: ["m1"], minions_denied: ["m3"] });
    assert.equal(readFileSync(dfnOf(bed.cfg.cachedir), "utf8"), "wheel-master");
    const r2 = await callWheel(bed.ctx, "key.reject", ["m*"], { include_accepted: true, include_denied: true });
    assert.deepEqual(r2.return, { minions_rejected: ["m1", "m2", "m3"] });
    assert.deepEqual(bed.notes, ["reject:m1", "reject:m2", "reject:m3"]);
    assert.deepEqual(
      bed.fired.map((f) => f.data),
      ["m1", "m2", "m3"].map((id) => ({ result: true, act: "reject", id })),
    );
    // Salt's reject has include_accepted, not include_rejected
    const wrong = await callWheel(bed.ctx, "key.reject", ["m*"], { include_rejected: true });
    assert.deepEqual(wrong, { success: false, return: "Exception occurred in wheel key.reject: SaltInvocationError: 'include_rejected' is an invalid keyword argument for 'salt.loaded.int.wheel.key.reject'" });
  } finally {
    bed.cleanup();
  }
});

test("delete removes matching keys in every state and the minions' session keys, then writes the drop file", async () => {
  const bed = makeBed();
  try {
    seed(bed, { accepted: ["d1", "keep"], pending: ["d2"], rejected: ["d3"], denied: ["d4"] });
    writeFileSync(path.join(bed.cfg.cachedir, "sessions", "d1"), "session-key");
    const r = await callWheel(bed.ctx, "key.delete", ["d*"], {});
    assert.deepEqual(r, { success: true, return: {} });
    assert.deepEqual(bed.notes.sort(), ["delete:d1", "delete:d2", "delete:d3", "delete:d4"]);
    assert.ok(bed.fired.every((f) => f.tag === "salt/key" && (f.data as { act: string }).act === "delete"));
    assert.ok(!existsSync(path.join(bed.cfg.cachedir, "sessions", "d1")));
    assert.ok(bed.keys.exists("accepted", "keep"));
    assert.equal(readFileSync(dfnOf(bed.cfg.cachedir), "utf8"), "wheel-master");
  } finally {
    bed.cleanup();
  }
});

test("a delete or reject that matched nothing changes nothing and asks for no rotation; rotate_aes_key false never does", async () => {
  const bed = makeBed();
  const norot = makeBed({ rotate_aes_key: false });
  try {
    seed(bed, { accepted: ["a"] });
    assert.deepEqual((await callWheel(bed.ctx, "key.delete", ["zzz*"], {})).return, {});
    assert.deepEqual((await callWheel(bed.ctx, "key.reject", ["a"], {})).return, { minions: ["a"] });
    assert.deepEqual(bed.notes, []);
    assert.ok(!existsSync(dfnOf(bed.cfg.cachedir)));
    seed(norot, { accepted: ["a"] });
    await callWheel(norot.ctx, "key.delete", ["a"], {});
    assert.deepEqual(norot.notes, ["delete:a"]);
    assert.ok(!existsSync(dfnOf(norot.cfg.cachedir)));
  } finally {
    bed.cleanup();
    norot.cleanup();
  }
});

test("accept_dict / reject_dict / delete_dict act on the named keys and answer where they are now", async () => {
  const bed = makeBed();
  try {
    seed(bed, { pending: ["jerry", "stuart", "bob"], rejected: ["kevin"] });
    const a = await callWheel(bed.ctx, "key.accept_dict", [{ minions_pre: ["jerry", "stuart"], minions_rejected: ["kevin"] }], {});
    assert.deepEqual(a.return, { minions: ["jerry", "stuart"], minions_rejected: ["kevin"] });
    const a2 = await callWheel(bed.ctx, "key.accept_dict", [{ minions_rejected: ["kevin"] }], { include_rejected: true });
    assert.deepEqual(a2.return, { minions: ["kevin"] });
    const r = await callWheel(bed.ctx, "key.reject_dict", [{ minions: ["jerry"], minions_pre: ["bob"] }], { include_accepted: true });
    // Salt's dict_match: in the order of the request's directories, each one's ids sorted
    assert.deepEqual(r.return, { minions_rejected: ["jerry", "bob"] });
    const d = await callWheel(bed.ctx, "key.delete_dict", [{ minions_rejected: ["bob"], minions: ["stuart"] }], {});
    assert.deepEqual(d.return, {});
    assert.deepEqual(bed.keys.list("accepted"), ["kevin"]);
    assert.deepEqual(bed.keys.list("rejected"), ["jerry"]);
    assert.deepEqual(bed.notes, ["accept:jerry", "accept:stuart", "accept:kevin", "reject:bob", "reject:jerry", "delete:stuart", "delete:bob"]);
  } finally {
    bed.cleanup();
  }
});

test("dict variants never reach outside the key directories: unknown directories and path-like ids are ignored", async () => {
  const bed = makeBed();
  try {
    seed(bed, { accepted: ["victim"] });
    const outside = path.join(bed.root, "outside");
    writeFileSync(outside, "precious");
    const d = await callWheel(bed.ctx, "key.delete_dict", [{ "..": ["outside"], minions: ["../../outside", "..", "victim/../victim"] }], {});
    assert.equal(d.success, true);
    assert.ok(existsSync(outside));
    assert.ok(bed.keys.exists("accepted", "victim"));
    const a = await callWheel(bed.ctx, "key.accept_dict", [{ minions_pre: ["../minions/victim"] }], {});
    assert.equal(a.success, true);
    assert.deepEqual(bed.notes, []);
    const proto = await callWheel(bed.ctx, "key.delete_dict", [JSON.parse('{"__proto__": ["victim"], "constructor": ["victim"]}')], {});
    // nothing deleted; Salt's dict_match reports where each requested id is, once per directory asked
    assert.deepEqual(proto, { success: true, return: { minions: ["victim", "victim"] } });
    assert.ok(bed.keys.exists("accepted", "victim"));
    const bad = await callWheel(bed.ctx, "key.delete_dict", [{ minions: "victim" }], {});
    assert.equal(bad.success, false);
    assert.ok(bed.keys.exists("accepted", "victim"));
  } finally {
    bed.cleanup();
  }
});

test("a key the filesystem will not remove is skipped and reported where it is; the others are deleted and the rotation still asked for", async () => {
  const bed = makeBed();
  try {
    seed(bed, { accepted: ["gone1", "gone2"] });
    mkdirSync(path.join(bed.keys.pkiDir, "minions", "stuck")); // a directory: rm without recursive refuses it
    const r = await callWheel(bed.ctx, "key.delete", ["*"], {});
    assert.deepEqual(r, { success: true, return: { minions: ["stuck"] } });
    assert.deepEqual(bed.notes, ["delete:gone1", "delete:gone2"]);
    assert.ok(existsSync(dfnOf(bed.cfg.cachedir)));
  } finally {
    bed.cleanup();
  }
});
