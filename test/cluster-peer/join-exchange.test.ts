/**
 * The join exchange of an isolated-filesystem cluster (src/workers/raft/peer/join.ts), without sockets: a joiner
 * with the secret and the pinned fingerprint is admitted and receives cluster.pem, the AES key and every member's
 * key; a wrong secret, a wrong fingerprint, another cluster_id, a known id with another key, a replayed DISCOVER,
 * a responder without the cluster key and spliced or tampered frames are refused with a reason, before anything
 * is handed out.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { repoRoot } from "../helpers/paths.js";
import { Encoder } from "cbor-x";
import {
  JoinError,
  JoinReplayGuard,
  JoinerExchange,
  ResponderExchange,
  noClusterFrame,
  peekRefusal,
  refuseFrame,
  type ClusterPin,
  type JoinerContext,
  type ResponderContext,
} from "../../src/workers/raft/peer/join.js";
import { pemFinger } from "../../src/shared/protocol/pem.js";
import { fingerprintMatches, normalizeFingerprint } from "../../src/shared/cluster-fingerprint.js";
import { CLUSTER, keyPair } from "./helpers.js";

const cbor = new Encoder({ mapsAsObjects: true, useRecords: false, tagUint8Array: false });
const clusterKey = keyPair("cluster");
const clusterPub = clusterKey.publicKey.export({ type: "spki", format: "pem" }) as string;
const clusterPem = clusterKey.privateKey.export({ type: "pkcs1", format: "pem" }) as string;
const FP = pemFinger(clusterPub, "sha256");
const pem = (k: KeyObject) => k.export({ type: "spki", format: "pem" }) as string;
const T0 = 1_800_000_000_000;

function joiner(over: Partial<JoinerContext> = {}, id = "m4"): JoinerExchange {
  const k = keyPair(id);
  return new JoinerExchange({ clusterId: CLUSTER, selfId: id, privateKey: k.privateKey, publicKey: k.publicKey, listen: { host: "127.0.0.9", port: 4520 }, secret: "s3cret", pin: { fingerprint: FP, hashType: "sha256" }, now: () => T0, random: (n) => randomBytes(n), ...over });
}

function responder(over: Partial<ResponderContext> = {}, known: Record<string, KeyObject> = {}, guard = new JoinReplayGuard()): ResponderExchange {
  const k = keyPair("m1");
  return new ResponderExchange(
    { clusterId: CLUSTER, selfId: "m1", privateKey: k.privateKey, publicKey: k.publicKey, secret: "s3cret", clusterKey: { privateKey: clusterKey.privateKey, pubPem: clusterPub }, knownKey: (id) => known[id], now: () => T0, random: (n) => randomBytes(n), ...over },
    guard,
  );
}

const material = { clusterPem, aes: "aes-key-text", members: { m1: pem(keyPair("m1").publicKey), m2: pem(keyPair("m2").publicKey) }, addresses: { m2: { host: "127.0.0.2", port: 4520 }, m7: { host: "x", port: 1 } } };

function refused(fn: () => unknown, reason: string, remote = false): JoinError {
  let err: JoinError | undefined;
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof JoinError, `expected a JoinError, got ${String(e)}`);
    assert.equal(e.reason, reason, e.message);
    assert.equal(e.remote, remote);
    err = e;
    return true;
  });
  return err!;
}

function rewrite(frame: Uint8Array, patch: (m: Record<string, unknown>) => void): Uint8Array {
  const outer = cbor.decode(frame.subarray(1)) as Record<string, unknown>;
  patch(outer);
  const body = cbor.encode(outer) as Uint8Array;
  const out = new Uint8Array(1 + body.length);
  out[0] = frame[0]!;
  out.set(body, 1);
  return out;
}

test("a joiner with the secret and the pinned fingerprint is admitted: it receives cluster.pem, the AES key, the secret and every member's key", () => {
  const j = joiner();
  const r = responder();
  const challenge = r.onDiscover(j.discover);
  const proof = j.onChallenge(challenge);
  const admit = r.onProof(proof);
  assert.equal(admit.id, "m4");
  assert.deepEqual([admit.host, admit.port], ["127.0.0.9", 4520], "the joiner says where the members can dial it");
  assert.equal(admit.pub, pem(keyPair("m4").publicKey));
  const got = j.onAdmit(r.admitted(material));
  assert.equal(got.via, "m1");
  assert.equal(got.clusterPem, clusterPem);
  assert.equal(got.clusterPub, clusterPub);
  assert.equal(got.aes, "aes-key-text");
  assert.equal(got.secret, "s3cret");
  assert.deepEqual(Object.keys(got.members).sort(), ["m1", "m2"]);
  assert.equal(got.members.m1, pem(keyPair("m1").publicKey));
  assert.deepEqual(got.addresses, { m2: { host: "127.0.0.2", port: 4520 } }, "addresses of members only");
});

test("the secret never appears in any frame, in clear or as its plain hash", () => {
  const secret = "a-very-recognisable-secret";
  const j = joiner({ secret });
  const r = responder({ secret });
  const frames = [j.discover];
  frames.push(r.onDiscover(frames[0]!));
  frames.push(j.onChallenge(frames[1]!));
  r.onProof(frames[2]!);
  for (const f of frames) assert.ok(!Buffer.from(f).includes(Buffer.from(secret)), "secret in a frame");
});

test("a wrong secret is refused by the responder after PROOF, before anything is handed out", () => {
  const j = joiner({ secret: "guess" });
  const r = responder();
  const proof = j.onChallenge(r.onDiscover(j.discover));
  const e = refused(() => r.onProof(proof), "secret");
  assert.match(e.message, /m4 does not know this cluster's cluster_secret/);
  // the joiner logs the same reason from the REFUSE frame
  refused(() => j.onAdmit(refuseFrame(e)), "secret", true);
  assert.throws(() => r.admitted(material), /stage failed/, "nothing can be handed out after a refusal");
});

test("an empty secret on one side only is a wrong secret", () => {
  const j = joiner({ secret: "" });
  const r = responder();
  refused(() => r.onProof(j.onChallenge(r.onDiscover(j.discover))), "secret");
});

test("a cluster key that does not match the pinned fingerprint is refused by the joiner, before it proves the secret", () => {
  const other = keyPair("other-cluster");
  const r = responder({ clusterKey: { privateKey: other.privateKey, pubPem: pem(other.publicKey) } });
  const j = joiner();
  const e = refused(() => j.onChallenge(r.onDiscover(j.discover)), "fingerprint");
  assert.match(e.message, /is not the one cluster_pub_fingerprint/);
  // the responder hears why (it logs the same line)
  assert.equal(peekRefusal(refuseFrame(e))?.reason, "fingerprint");
});

test("a pin by a shared cluster.pub works like a fingerprint; a different cluster.pub is refused", () => {
  const ok = joiner({ pin: { clusterPub } });
  const r = responder();
  assert.ok(ok.onChallenge(r.onDiscover(ok.discover)).length > 0);
  const wrong = joiner({ pin: { clusterPub: pem(keyPair("x").publicKey) } });
  refused(() => wrong.onChallenge(responder().onDiscover(wrong.discover)), "fingerprint");
});

test("a member comparing a peer's cluster key with its own names a second cluster with the same cluster_id as such; the same key passes, a key it cannot sign with is forged", () => {
  const mine = keyPair("my-cluster");
  const probe = joiner({ pin: { clusterPub: pem(mine.publicKey), own: true } });
  const e = refused(() => probe.onChallenge(responder().onDiscover(probe.discover)), "another-cluster");
  assert.match(e.message, /m1 is in a second cluster named "brine-test" with another key .*two clusters were founded with one cluster_id/);
  assert.equal(peekRefusal(refuseFrame(e))?.reason, "another-cluster", "the peer hears why");
  const same = joiner({ pin: { clusterPub, own: true } });
  assert.ok(same.onChallenge(responder().onDiscover(same.discover)).length > 0);
  const forger = joiner({ pin: { clusterPub: pem(mine.publicKey), own: true } });
  refused(() => forger.onChallenge(responder({ clusterKey: { privateKey: keyPair("x").privateKey, pubPem: clusterPub } }).onDiscover(forger.discover)), "forged");
});

test("a responder that shows the right cluster key but cannot sign with it is refused as forged", () => {
  const other = keyPair("other-cluster");
  // right public key, wrong private key: the csig does not verify
  const r = responder({ clusterKey: { privateKey: other.privateKey, pubPem: clusterPub } });
  const j = joiner();
  refused(() => j.onChallenge(r.onDiscover(j.discover)), "forged");
});

test("a joiner with no pin trusts no cluster: it refuses and names cluster_pub_fingerprint", () => {
  const j = joiner({ pin: undefined });
  const e = refused(() => j.onChallenge(responder().onDiscover(j.discover)), "fingerprint");
  assert.match(e.message, /set cluster_pub_fingerprint/);
});

test("another cluster_id is refused by the responder at DISCOVER", () => {
  const j = joiner({ clusterId: "another" });
  const e = refused(() => responder().onDiscover(j.discover), "cluster");
  assert.match(e.message, /asks to join cluster "another"/);
});

test("a node id the cluster knows with another key is refused; the same key is admitted again (a wiped cachedir rejoins)", () => {
  const j = joiner();
  refused(() => responder({}, { m4: keyPair("someone-else").publicKey }).onDiscover(j.discover), "known-id");
  const again = joiner();
  const r = responder({}, { m4: keyPair("m4").publicKey });
  const got = again.onAdmit(((x) => (r.onProof(again.onChallenge(x)), r.admitted(material)))(r.onDiscover(again.discover)));
  assert.equal(got.via, "m1");
});

test("a master the cluster log records as removed is refused even with the right secret, until it is re-admitted", () => {
  const removed = new Set(["m4"]);
  const held = responder({ removed: (id) => removed.has(id) });
  const e = refused(() => held.onDiscover(joiner().discover), "removed");
  assert.match(e.message, /m4 was removed from cluster .* cluster\.readmit_member id=m4/);
  assert.equal(held.joinerId, "m4", "the responder's log line names it");
  removed.delete("m4");
  const j = joiner();
  const r = responder({ removed: (id) => removed.has(id) });
  assert.equal(j.onAdmit(((x) => (r.onProof(j.onChallenge(x)), r.admitted(material)))(r.onDiscover(j.discover))).via, "m1");
});

test("a replayed DISCOVER is refused; so is one dated outside the window", () => {
  const guard = new JoinReplayGuard();
  const j = joiner();
  responder({}, {}, guard).onDiscover(j.discover);
  refused(() => responder({}, {}, guard).onDiscover(j.discover), "replay");
  const old = joiner({ now: () => T0 - 10 * 60_000 });
  refused(() => responder({}, {}, guard).onDiscover(old.discover), "replay");
});

test("a replayed PROOF does not open against a new CHALLENGE", () => {
  const j = joiner();
  const proof = j.onChallenge(responder().onDiscover(j.discover));
  // an attacker replays DISCOVER (to a responder that has not seen it) and then the captured PROOF
  const r2 = responder();
  r2.onDiscover(j.discover);
  refused(() => r2.onProof(proof), "forged");
});

test("a DISCOVER whose signed body was altered is refused as forged", () => {
  const j = joiner();
  const tampered = rewrite(j.discover, (o) => {
    const m = cbor.decode(o.m as Uint8Array) as Record<string, unknown>;
    m.from = "m9";
    o.m = cbor.encode(m);
  });
  refused(() => responder().onDiscover(tampered), "forged");
});

test("a responder without a cluster answers no-cluster with its id (founding reads it)", () => {
  const j = joiner();
  refused(() => responder({ clusterKey: undefined }).onDiscover(j.discover), "no-cluster");
  assert.deepEqual(peekRefusal(noClusterFrame("m1")), { reason: "no-cluster", detail: "m1 has no cluster yet", id: "m1" });
});

test("the joiner's own id from a responder is refused; so are frames out of order and garbage", () => {
  const r = responder({ selfId: "m4" });
  refused(() => r.onDiscover(joiner().discover), "duplicate-id");
  const j = joiner();
  refused(() => j.onAdmit(new Uint8Array([7, 1, 2])), "state");
  refused(() => responder().onDiscover(new Uint8Array([7, 0xff, 0xff])), "bad-frame");
  refused(() => responder().onDiscover(new Uint8Array([1, 2, 3])), "bad-frame");
});

test("cluster_pub_fingerprint takes salt-key -F's text, bare hex in any case, or Salt 3008's SHA-256 of the PEM; anything else is a config error", () => {
  assert.ok(fingerprintMatches(clusterPub, FP, "sha256"));
  assert.ok(fingerprintMatches(clusterPub, FP.replace(/:/g, "").toUpperCase(), "sha256"));
  assert.ok(fingerprintMatches(clusterPub, pemFinger(clusterPub, "md5"), "md5"));
  assert.ok(!fingerprintMatches(clusterPub, pemFinger(clusterPub, "md5"), "sha256"));
  assert.ok(!fingerprintMatches(pem(keyPair("x").publicKey), FP, "sha256"));
  assert.throws(() => normalizeFingerprint("not hex"), /CLUSTER_CONFIG|cluster_pub_fingerprint/);
  assert.throws(() => normalizeFingerprint("ab:cd"), /not a fingerprint/);
  const pin: ClusterPin = { fingerprint: FP, hashType: "sha256" };
  assert.ok("fingerprint" in pin);
});

test("the cluster.pub line of salt-key -F is what Python's salt-key prints, and cluster_pub_fingerprint takes it as printed", () => {
  const golden = JSON.parse(readFileSync(path.join(repoRoot, "test", "fixtures", "cluster-join", "salt-key-F-cluster-pub.json"), "utf8")) as { cluster_pub: string; line: string };
  assert.equal(`cluster.pub:  ${pemFinger(golden.cluster_pub, "sha256")}`, golden.line);
  assert.ok(fingerprintMatches(golden.cluster_pub, golden.line.slice("cluster.pub:".length), "sha256"));
});
