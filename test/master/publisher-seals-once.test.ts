/**
 * Clustered, a publish is sealed (encrypted and signed) once in the cluster: the origin's publisher thread hands
 * its frames with their loads to the peers, and a peer's publisher thread sends a frame as it came when its
 * minions accept it, sealing the load itself otherwise (a rotated AES key, masters configured apart, a damaged or
 * forged frame, an older brine that forwards loads only). Two real publisher threads, as two masters have them.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { PublisherClient } from "../../src/main-thread/publisher-client.js";
import type { PublisherInit } from "../../src/workers/publisher/messages.js";
import { sealedFrameFault, type SealedFrameRules } from "../../src/workers/publisher/sealed-frame.js";
import { SharedSecrets } from "../../src/shared/secrets.js";
import { Crypticle, generateKeyString } from "../../src/shared/protocol/crypticle.js";
import { decodeWire, encodeWire } from "../../src/shared/protocol/msgpack.js";
import { rsaSign, rsaVerify } from "../../src/shared/protocol/rsa.js";

const ALGO = "PKCS1v15-SHA1";

function keyDir(): { dir: string; pub: KeyObject; priv: KeyObject } {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-pubseal-"));
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  writeFileSync(path.join(dir, "cluster.pem"), privateKey.export({ type: "pkcs1", format: "pem" }));
  return { dir, pub: publicKey, priv: privateKey };
}

interface Rig {
  client: PublisherClient;
  secrets: SharedSecrets;
  /** every frame the thread returned, in order */
  frames: Buffer[];
  /** what it handed over for the peers */
  sealed: { loads: Uint8Array; frames: Uint8Array[] }[];
  logFile: string;
  /** resolves once `n` replies have come */
  replies(n: number): Promise<void>;
}

function rig(dir: string, aes: string, over: Partial<PublisherInit> = {}): Rig {
  const secrets = new SharedSecrets();
  secrets.setAesKey(aes);
  const logFile = path.join(dir, `publisher-${Math.random().toString(36).slice(2)}.log`);
  const frames: Buffer[] = [];
  const sealed: Rig["sealed"] = [];
  let got = 0;
  const waiters: { n: number; done: () => void }[] = [];
  const client = new PublisherClient(
    { secrets: secrets.sab, pkiDir: dir, keyName: "cluster", signPubMessages: true, signingAlgorithm: ALGO, clustered: true, log: { level: "critical", file: logFile, fileLevel: "warning" }, ...over },
    {
      frames: (f) => {
        frames.push(...f);
        got++;
        for (const w of waiters.filter((w) => got >= w.n)) w.done();
      },
      sealed: (loads, f) => sealed.push({ loads, frames: f }),
    },
  );
  return { client, secrets, frames, sealed, logFile, replies: (n) => (got >= n ? Promise.resolve() : new Promise((r) => waiters.push({ n, done: r }))) };
}

/** What a minion of a master with this AES key and cluster public key reads of a frame (salt/channel/client.py). */
function minionReads(frame: Uint8Array, aes: string, pub: KeyObject, signed = true): Record<string, unknown> {
  const env = decodeWire(frame) as Record<string, Buffer | string>;
  assert.equal(env.enc, "aes");
  if (signed) assert.ok(rsaVerify(pub, env.load as Buffer, env.sig as Buffer, ALGO), "the signature verifies with the cluster key");
  return new Crypticle(aes).loads(env.load as Buffer) as Record<string, unknown>;
}

const load = (jid: string) => ({ fun: "test.ping", arg: [], tgt: "*", tgt_type: "glob", jid, user: "root", ret: "" });

async function withTwo(fn: (origin: Rig, peer: Rig, k: ReturnType<typeof keyDir>, aes: string) => Promise<void>, peerOver: Partial<PublisherInit> = {}, peerAes?: string): Promise<void> {
  const k = keyDir();
  const aes = generateKeyString();
  const origin = rig(k.dir, aes);
  const peer = rig(k.dir, peerAes ?? aes, peerOver);
  try {
    await fn(origin, peer, k, aes);
  } finally {
    await origin.client.stop();
    await peer.client.stop();
    rmSync(k.dir, { recursive: true, force: true });
  }
}

test("a peer sends the origin's sealed frame as it came: one signature for the publish on the two masters", async () => {
  await withTwo(async (origin, peer, k, aes) => {
    origin.client.publish([load("20261127000000000001"), load("20261127000000000002")]);
    await origin.replies(1);
    assert.equal(origin.sealed.length, 1, "the origin hands its sealed publishes over for the peers");
    const { loads, frames } = origin.sealed[0]!;
    assert.deepEqual((decodeWire(loads) as Record<string, unknown>[]).map((l) => l.jid), ["20261127000000000001", "20261127000000000002"]);
    peer.client.forwarded("m1", loads, frames);
    await peer.replies(1);
    assert.deepEqual(peer.frames.map((f) => f.toString("hex")), origin.frames.map((f) => f.toString("hex")), "the same bytes on both masters");
    assert.equal(minionReads(peer.frames[0]!, aes, k.pub).jid, "20261127000000000001");
    assert.equal(origin.client.counts.signed + peer.client.counts.signed, 2, "two publishes, two signatures in all");
    assert.deepEqual(peer.client.counts, { sealed: 0, signed: 0, passed: 2, refused: 0, dropped: 0 });
    assert.equal(peer.sealed.length, 0, "what a peer received is never handed over for forwarding again");
  });
});

test("a frame sealed under an AES key the peer no longer (or not yet) has is not sent; the peer seals the load under its own key", async () => {
  const peerAes = generateKeyString();
  await withTwo(async (origin, peer, k) => {
    origin.client.publish([load("20261127000000000003")]);
    await origin.replies(1);
    peer.client.forwarded("m1", origin.sealed[0]!.loads, origin.sealed[0]!.frames);
    await peer.replies(1);
    assert.notDeepEqual(peer.frames[0], origin.frames[0]);
    assert.equal(minionReads(peer.frames[0]!, peerAes, k.pub).jid, "20261127000000000003", "the peer's minions read it with the peer's key");
    assert.deepEqual(peer.client.counts, { sealed: 1, signed: 1, passed: 0, refused: 1, dropped: 0 });
    assert.match(readFileSync(peer.logFile, "utf8"), /forwarded by m1 was not sent as it came: not sealed under this master's current AES key; its load is sealed here/);
  }, {}, peerAes);
});

test("a forged frame (a damaged ciphertext, a signature of another key) is refused with a log line and its load sealed by the peer", async () => {
  await withTwo(async (origin, peer, k, aes) => {
    origin.client.publish([load("20261127000000000004"), load("20261127000000000005")]);
    await origin.replies(1);
    const [f1, f2] = origin.sealed[0]!.frames.map((f) => decodeWire(f) as Record<string, Buffer | string>);
    const damaged = Buffer.from(f1!.load as Buffer);
    damaged[20]! ^= 1;
    const other = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
    const forged = [encodeWire({ ...f1, load: damaged }), encodeWire({ ...f2, sig: rsaSign(other, f2!.load as Buffer, ALGO) })];
    peer.client.forwarded("m1", origin.sealed[0]!.loads, forged);
    await peer.replies(1);
    assert.equal(peer.frames.length, 2);
    for (const f of peer.frames) assert.ok(!forged.some((g) => g.equals(f)), "no forged bytes reach the peer's subscribers");
    assert.deepEqual(peer.frames.map((f) => minionReads(f, aes, k.pub).jid), ["20261127000000000004", "20261127000000000005"]);
    assert.equal(peer.client.counts.refused, 2);
    const logged = readFileSync(peer.logFile, "utf8");
    assert.match(logged, /not sealed under this master's current AES key/);
    assert.match(logged, /its signature does not verify with the cluster key/);
  });
});

test("a malformed forwarded batch is dropped with a log line and the thread goes on publishing", async () => {
  await withTwo(async (_origin, peer, k, aes) => {
    peer.client.forwarded("m1", new Uint8Array([0xc1]), [new Uint8Array([1, 2, 3])]);
    peer.client.forwarded("m1", encodeWire(["not a map"]));
    peer.client.publish([load("20261127000000000006")]);
    await peer.replies(3);
    assert.equal(peer.frames.length, 1, "only the peer's own publish was sent");
    assert.equal(minionReads(peer.frames[0]!, aes, k.pub).jid, "20261127000000000006");
    assert.equal(peer.client.counts.dropped, 2);
    const logged = readFileSync(peer.logFile, "utf8");
    assert.match(logged, /not a msgpack frame/);
    assert.match(logged, /no load for it either, dropped/);
    assert.match(logged, /publishes forwarded by m1 dropped: their loads are not a list of maps/);
  });
});

test("publishes from an older brine (loads only) are sealed and signed by the peer, as before", async () => {
  await withTwo(async (_origin, peer, k, aes) => {
    peer.client.forwarded("m1", encodeWire([load("20261127000000000007")]));
    await peer.replies(1);
    assert.equal(minionReads(peer.frames[0]!, aes, k.pub).jid, "20261127000000000007");
    assert.deepEqual(peer.client.counts, { sealed: 1, signed: 1, passed: 0, refused: 0, dropped: 0 });
  });
});

test("with sign_pub_messages off on every master, unsigned frames pass; a peer that signs does not send an origin's unsigned frame", async () => {
  const k = keyDir();
  const aes = generateKeyString();
  const origin = rig(k.dir, aes, { signPubMessages: false });
  const quiet = rig(k.dir, aes, { signPubMessages: false });
  const signing = rig(k.dir, aes);
  try {
    origin.client.publish([load("20261127000000000008")]);
    await origin.replies(1);
    const { loads, frames } = origin.sealed[0]!;
    assert.equal((decodeWire(frames[0]!) as Record<string, unknown>).sig, undefined);
    quiet.client.forwarded("m1", loads, frames);
    signing.client.forwarded("m1", loads, frames);
    await quiet.replies(1);
    await signing.replies(1);
    assert.ok(quiet.frames[0]!.equals(origin.frames[0]!));
    assert.equal(minionReads(signing.frames[0]!, aes, k.pub).jid, "20261127000000000008", "signed by the peer that signs");
    assert.deepEqual([origin.client.counts.signed, quiet.client.counts.signed, signing.client.counts.signed], [0, 0, 1]);
    assert.match(readFileSync(signing.logFile, "utf8"), /unsigned, and this master signs its publishes/);
  } finally {
    await Promise.all([origin, quiet, signing].map((r) => r.client.stop()));
    rmSync(k.dir, { recursive: true, force: true });
  }
});

test("unclustered, each publish carries this master's serial and nothing is handed over for peers", async () => {
  const k = keyDir();
  const aes = generateKeyString();
  const solo = rig(k.dir, aes, { clustered: false });
  try {
    solo.client.publish([load("20261127000000000009"), load("20261127000000000010")]);
    await solo.replies(1);
    assert.deepEqual(solo.frames.map((f) => minionReads(f, aes, k.pub).serial), [1, 2]);
    assert.equal(solo.sealed.length, 0);
    // a forwarded frame cannot carry this master's serial: the load is sealed here
    solo.client.forwarded("m1", encodeWire([load("20261127000000000011")]), [solo.frames[0]!]);
    await solo.replies(2);
    assert.equal(minionReads(solo.frames[2]!, aes, k.pub).serial, 3);
    assert.equal(existsSync(solo.logFile) ? /not sent as it came/.test(readFileSync(solo.logFile, "utf8")) : false, false);
  } finally {
    await solo.client.stop();
    rmSync(k.dir, { recursive: true, force: true });
  }
});

test("the frame rules: shape, signedness and algorithm, key and signature checks, in that order", () => {
  const aes = generateKeyString();
  const c = new Crypticle(aes);
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const rules: SealedFrameRules = { signed: true, sigAlgo: ALGO, authentic: (s) => c.authentic(s), verifies: (s, sig) => rsaVerify(publicKey, s, sig, ALGO) };
  const sealed = c.dumps(load("20261127000000000012"));
  const good = { enc: "aes", load: sealed, sig: rsaSign(privateKey, sealed, ALGO), sig_algo: ALGO };
  assert.equal(sealedFrameFault(encodeWire(good), rules), undefined);
  assert.match(sealedFrameFault(encodeWire({ ...good, serial: 4 }), rules)!, /unexpected key "serial"/);
  assert.match(sealedFrameFault(encodeWire({ ...good, enc: "clear" }), rules)!, /enc is "clear"/);
  assert.match(sealedFrameFault(encodeWire({ ...good, load: 7 }), rules)!, /load is not bytes/);
  assert.match(sealedFrameFault(encodeWire({ ...good, sig_algo: "PKCS1v15-SHA224" }), rules)!, /sig_algo "PKCS1v15-SHA224" is not this master's/);
  assert.match(sealedFrameFault(encodeWire({ enc: "aes", load: sealed }), rules)!, /unsigned/);
  assert.match(sealedFrameFault(encodeWire(good), { ...rules, signed: false })!, /this master does not sign/);
  assert.match(sealedFrameFault(encodeWire({ ...good, load: new Crypticle(generateKeyString()).dumps({}) }), rules)!, /current AES key/);
  assert.match(sealedFrameFault(encodeWire({ ...good, sig: Buffer.alloc(256) }), rules)!, /does not verify/);
  assert.match(sealedFrameFault(new Uint8Array([0x92, 1]), rules)!, /not a msgpack frame/);
  assert.match(sealedFrameFault(encodeWire([1]), rules)!, /not a map/);
});
