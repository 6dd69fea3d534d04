/**
 * Start-up refusals of the cluster configuration and keys: wildcard or duplicate node ids, wildcard or
 * repeated peers, Salt's option names (cluster_port alias, cluster_pki_dir fallback), and missing,
 * unreadable, unparsable, too-small or conflicting keys, each with a coded error that names the fix.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadClusterKeys, parseClusterConfig, parsePeerEntry, peerTransportOptions, type ClusterConfigInput } from "../../src/shared/cluster-config.js";
import { PeerTransport } from "../../src/workers/raft/peer/peer-transport.js";
import { FileKeyring } from "../../src/shared/cluster-keys.js";
import { LogCapture, keyPair } from "./helpers.js";

function base(over: Partial<ClusterConfigInput> = {}): ClusterConfigInput {
  return {
    id: "m1",
    interface: "0.0.0.0",
    pki_dir: "/etc/salt/pki/master",
    cluster_id: "prod",
    cluster_peers: ["10.0.0.2", "10.0.0.3:4600"],
    cluster_pki_dir: "/shared/pki",
    cluster_pool_port: 4520,
    ...over,
  };
}

function refuses(over: Partial<ClusterConfigInput>, code: string, msg: RegExp): void {
  assert.throws(() => parseClusterConfig(base(over), new LogCapture()), (e: unknown) => {
    assert.equal((e as { code?: string }).code, code, String(e));
    assert.match((e as Error).message, msg);
    return true;
  });
}

test("cluster_peers entries: host, host:port, [v6]:port, bare v6, and {id, host, port}; the port defaults to cluster_pool_port", () => {
  assert.deepEqual(parsePeerEntry("10.0.0.2", 4520), { host: "10.0.0.2", port: 4520 });
  assert.deepEqual(parsePeerEntry(" m2.example:4600 ", 4520), { host: "m2.example", port: 4600 });
  assert.deepEqual(parsePeerEntry("[fd00::2]:4601", 4520), { host: "fd00::2", port: 4601 });
  assert.deepEqual(parsePeerEntry("[fd00::2]", 4520), { host: "fd00::2", port: 4520 });
  assert.deepEqual(parsePeerEntry("fd00::2", 4520), { host: "fd00::2", port: 4520 });
  assert.deepEqual(parsePeerEntry({ id: "m2", host: "10.0.0.2" }, 4520), { host: "10.0.0.2", port: 4520, id: "m2" });
  const s = parseClusterConfig(base(), new LogCapture());
  assert.equal(s.nodeId, "m1");
  assert.deepEqual(s.listen, { host: "0.0.0.0", port: 4520 });
  assert.deepEqual(s.peers, [
    { host: "10.0.0.2", port: 4520 },
    { host: "10.0.0.3", port: 4600 },
  ]);
  assert.equal(s.peerKeyDir, path.join("/shared/pki", "peers"));
});

test("cluster_port is accepted as a deprecated alias of cluster_pool_port, with a warning", () => {
  const log = new LogCapture();
  const s = parseClusterConfig(base({ cluster_pool_port: undefined, cluster_port: 55596 }), log);
  assert.equal(s.listen.port, 55596);
  assert.equal(s.peers[0]!.port, 55596, "peers without a port use it too");
  assert.ok(log.warnings().some((l) => l.includes("cluster_port is deprecated")));
  const both = new LogCapture();
  assert.equal(parseClusterConfig(base({ cluster_pool_port: 4700, cluster_port: 55596 }), both).listen.port, 4700);
  assert.ok(both.warnings().some((l) => l.includes("ignored")));
});

test("cluster_pki_dir falls back to pki_dir (3007)", () => {
  assert.equal(parseClusterConfig(base({ cluster_pki_dir: null }), new LogCapture()).peerKeyDir, path.join("/etc/salt/pki/master", "peers"));
});

test("a wildcard node id is refused, in every spelling, with the fix in the message", () => {
  for (const id of ["0.0.0.0", "::", "*", "[::]:4520", "0.0.0.0:4520"]) refuses({ id }, "CLUSTER_BAD_NODE_ID", /wildcard.*set `id`/);
  refuses({ id: "" }, "CLUSTER_BAD_NODE_ID", /empty/);
  refuses({ id: "../m1" }, "CLUSTER_BAD_NODE_ID", /path separator/);
});

test("a wildcard peer address is refused", () => {
  for (const p of ["0.0.0.0", "0.0.0.0:4520", "[::]:4520", "*", "::"]) refuses({ cluster_peers: [p] }, "CLUSTER_BAD_NODE_ID", /wildcard address/);
});

test("duplicate node ids are refused: a peer listed twice, two entries with one id, this master as its own peer", () => {
  refuses({ cluster_peers: ["10.0.0.2", "10.0.0.2:4520"] }, "CLUSTER_BAD_NODE_ID", /repeats cluster_peers\[0\]/);
  refuses({ cluster_peers: ["M2.example", "m2.example"] }, "CLUSTER_BAD_NODE_ID", /repeats/);
  refuses({ cluster_peers: [{ id: "m2", host: "a" }, { id: "m2", host: "b" }] }, "CLUSTER_BAD_NODE_ID", /both have id "m2"/);
  refuses({ cluster_peers: [{ id: "m1", host: "10.0.0.9" }] }, "CLUSTER_BAD_NODE_ID", /own id "m1"/);
  refuses({ interface: "10.0.0.1", cluster_peers: [{ id: "m9", host: "10.0.0.1" }] }, "CLUSTER_BAD_NODE_ID", /names id "m9" at this master's own interface/);
});

test("this master in its own cluster_peers (the same list on every master) is ignored", () => {
  const logs = new LogCapture();
  const s = parseClusterConfig(base({ interface: "10.0.0.1", cluster_peers: ["10.0.0.1", "10.0.0.2"] }), logs);
  assert.deepEqual(s.peers.map((p) => p.host), ["10.0.0.2"]);
  assert.ok(logs.lines.some((l) => /cluster_peers\[0\] \(10\.0\.0\.1:4520\) is this master; ignored/.test(l.msg)), JSON.stringify(logs.lines));
  const t = parseClusterConfig(base({ interface: "10.0.0.1", cluster_peers: [{ id: "m1", host: "10.0.0.1" }, "10.0.0.3"] }), new LogCapture());
  assert.deepEqual(t.peers.map((p) => p.host), ["10.0.0.3"]);
});

test("missing cluster_id, bad ports and malformed peers are refused with CLUSTER_CONFIG", () => {
  refuses({ cluster_id: null }, "CLUSTER_CONFIG", /cluster_id must be set/);
  refuses({ cluster_id: "  " }, "CLUSTER_CONFIG", /cluster_id must be set/);
  refuses({ cluster_pool_port: 70000 }, "CLUSTER_CONFIG", /cluster_pool_port must be a port/);
  refuses({ cluster_port: "abc", cluster_pool_port: undefined }, "CLUSTER_CONFIG", /cluster_port must be a port/);
  refuses({ cluster_peers: "10.0.0.2" }, "CLUSTER_CONFIG", /must be a list/);
  refuses({ cluster_peers: ["10.0.0.2:99999"] }, "CLUSTER_CONFIG", /port/);
  refuses({ cluster_peers: [42] }, "CLUSTER_CONFIG", /host/);
  refuses({ cluster_peers: ["m2.example/x"] }, "CLUSTER_CONFIG", /not a host/);
  refuses({ cluster_peers: ["http://m2:4520"] }, "CLUSTER_CONFIG", /not a host/);
  refuses({ interface: "" }, "CLUSTER_CONFIG", /interface must be set/);
});

// ------------------------------------------------------------------ keys

interface Dirs {
  pki: string;
  cpki: string;
  peers: string;
}

/** pki_dir with m1's master.pem (PKCS#1, as Salt writes it) and cluster_pki_dir/peers with m2's key. */
function dirs(): Dirs {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-peer-keys-"));
  const d = { pki: path.join(root, "pki"), cpki: path.join(root, "cluster"), peers: path.join(root, "cluster", "peers") };
  mkdirSync(d.pki, { recursive: true });
  mkdirSync(d.peers, { recursive: true });
  writeFileSync(path.join(d.pki, "master.pem"), keyPair("m1").privateKey.export({ type: "pkcs1", format: "pem" }));
  writeFileSync(path.join(d.peers, "m2.pub"), keyPair("m2").publicKey.export({ type: "spki", format: "pem" }));
  return d;
}

function settings(d: Dirs, over: Partial<ClusterConfigInput> = {}) {
  return parseClusterConfig(base({ pki_dir: d.pki, cluster_pki_dir: d.cpki, cluster_peers: ["127.0.0.2"], ...over }), new LogCapture());
}

function keyRefusal(fn: () => unknown, code: string, msg: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.equal((e as { code?: string }).code, code, String(e));
    assert.match((e as Error).message, msg);
    return true;
  });
}

test("keys load: this master's identity from master.pem and every peers/<id>.pub, ready for the transport", async () => {
  const d = dirs();
  const s = settings(d, { interface: "127.0.0.1", cluster_pool_port: 45000 });
  const k = loadClusterKeys(s);
  assert.equal(k.self.id, "m1");
  assert.deepEqual(k.keyring.peerIds(), ["m2"]);
  assert.ok(k.keyring.get("m2"));
  const t = new PeerTransport(peerTransportOptions(s, k, { reconnectMinMs: 50 }, new LogCapture()));
  assert.equal(t.selfId, "m1");
  assert.deepEqual(t.status().map((p) => p.address), ["127.0.0.2:45000"]);
  await t.close();
});

test("a missing, unreadable or unparsable master.pem is refused with CLUSTER_KEY naming the file", () => {
  const d = dirs();
  writeFileSync(path.join(d.pki, "master.pem"), "not a key");
  keyRefusal(() => loadClusterKeys(settings(d)), "CLUSTER_KEY", /master\.pem could not be parsed/);
  // a directory where the key should be: unreadable as a file, even for root
  const d2 = dirs();
  rmSync(path.join(d2.pki, "master.pem"));
  mkdirSync(path.join(d2.pki, "master.pem"));
  keyRefusal(() => loadClusterKeys(settings(d2)), "CLUSTER_KEY", /private key .*master\.pem/);
  const d3 = dirs();
  const missing = { ...settings(d3), pkiDir: path.join(d3.pki, "nowhere") };
  keyRefusal(() => loadClusterKeys(missing), "CLUSTER_KEY", /nowhere\/master\.pem does not exist/);
});

test("an unparsable, wrongly named or too small peer key is refused with CLUSTER_KEY naming the file", () => {
  const d = dirs();
  writeFileSync(path.join(d.peers, "m3.pub"), "-----BEGIN PUBLIC KEY-----\ngarbage\n-----END PUBLIC KEY-----\n");
  keyRefusal(() => loadClusterKeys(settings(d)), "CLUSTER_KEY", /peers\/m3\.pub is not a public key/);
  const d2 = dirs();
  mkdirSync(path.join(d2.peers, "m4.pub"));
  keyRefusal(() => loadClusterKeys(settings(d2)), "CLUSTER_KEY", /m4\.pub/);
  const d3 = dirs();
  writeFileSync(path.join(d3.peers, ".hidden.pub"), keyPair("m2").publicKey.export({ type: "spki", format: "pem" }));
  keyRefusal(() => loadClusterKeys(settings(d3)), "CLUSTER_KEY", /not named <node id>\.pub/);
  const d4 = dirs();
  const small = generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey;
  writeFileSync(path.join(d4.peers, "m5.pub"), small.export({ type: "spki", format: "pem" }));
  keyRefusal(() => loadClusterKeys(settings(d4)), "CLUSTER_KEY", /RSA-1024; at least 2048/);
});

test("peers configured but no peer key on disk, or a named peer without its key, is refused", () => {
  const d = dirs();
  const none = { ...settings(d), peerKeyDir: path.join(d.cpki, "empty") };
  keyRefusal(() => loadClusterKeys(none), "CLUSTER_KEY", /holds no peer key/);
  assert.doesNotThrow(() => loadClusterKeys(none, { requirePeerKeys: false }));
  keyRefusal(() => loadClusterKeys(settings(d, { cluster_peers: [{ id: "m7", host: "127.0.0.7" }] })), "CLUSTER_KEY", /no key for peer "m7"/);
});

test("isolated filesystem: a peer named by id whose key is not on disk yet does not stop the start (the join or the cluster log brings it)", () => {
  const d = dirs();
  const iso = settings(d, { cluster_peers: [{ id: "m7", host: "127.0.0.7" }], cluster_isolated_filesystem: true, cluster_secret: "s" });
  assert.ok(iso.isolated);
  const k = loadClusterKeys(iso, { requirePeerKeys: false });
  assert.deepEqual(k.keyring.peerIds(), ["m2"], "m7 has no key yet");
});

test("peers/<own id>.pub holding another key is refused as a duplicate node id; a missing one can be published", () => {
  const d = dirs();
  writeFileSync(path.join(d.peers, "m1.pub"), keyPair("someone-else").publicKey.export({ type: "spki", format: "pem" }));
  keyRefusal(() => loadClusterKeys(settings(d)), "CLUSTER_BAD_NODE_ID", /duplicate node id "m1".*give each master its own `id`/);
  const d2 = dirs();
  const own = path.join(d2.peers, "m1.pub");
  assert.equal(existsSync(own), false);
  loadClusterKeys(settings(d2), { publishSelf: true });
  assert.match(readFileSync(own, "utf8"), /BEGIN PUBLIC KEY/);
  assert.doesNotThrow(() => loadClusterKeys(settings(d2)), "the published key matches on the next start");
});

test("the file keyring picks up a key that appears later, and never reads outside peers/", () => {
  const d = dirs();
  const ring = new FileKeyring(d.peers, "m1", { missRecheckMs: 0 }).load();
  assert.equal(ring.get("m9"), undefined);
  writeFileSync(path.join(d.peers, "m9.pub"), keyPair("m9").publicKey.export({ type: "spki", format: "pem" }));
  assert.ok(ring.get("m9"), "found on the next lookup");
  writeFileSync(path.join(d.cpki, "outside.pub"), keyPair("m9").publicKey.export({ type: "spki", format: "pem" }));
  assert.equal(ring.get("../outside"), undefined);
  assert.equal(ring.get(".hidden"), undefined);
});

test("isolated filesystem: an empty cluster_secret is refused unless brine_cluster_allow_empty_secret, which is warned about", () => {
  refuses({ cluster_isolated_filesystem: true }, "CLUSTER_CONFIG", /needs a cluster_secret.*brine_cluster_allow_empty_secret/);
  refuses({ cluster_isolated_filesystem: true, cluster_secret: "" }, "CLUSTER_CONFIG", /needs a cluster_secret/);
  const logs = new LogCapture();
  const s = parseClusterConfig(base({ cluster_isolated_filesystem: true, brine_cluster_allow_empty_secret: true }), logs);
  assert.equal(s.isolated?.secret, "");
  assert.ok(logs.warnings().some((w) => /cluster_secret is empty/.test(w)), JSON.stringify(logs.lines));
});

test("isolated filesystem: the options as read (fingerprint checked, join timeout in ms, explicit founding warned about)", () => {
  const fp = "AB:".repeat(31) + "AB";
  const logs = new LogCapture();
  const s = parseClusterConfig(base({ cluster_isolated_filesystem: true, cluster_secret: "s", cluster_pub_fingerprint: fp, cluster_join_timeout: 7, brine_cluster_found: true, hash_type: "sha512" }), logs);
  assert.deepEqual(s.isolated, { secret: "s", fingerprint: fp, hashType: "sha512", joinTimeoutMs: 7000, found: true });
  assert.ok(logs.warnings().some((w) => /brine_cluster_found/.test(w)));
  refuses({ cluster_isolated_filesystem: true, cluster_secret: "s", cluster_pub_fingerprint: "not-a-fingerprint" }, "CLUSTER_CONFIG", /cluster_pub_fingerprint .* is not a fingerprint/);
  assert.equal(parseClusterConfig(base({ cluster_secret: "s" }), new LogCapture()).isolated, undefined, "shared filesystem: no join by secret");
});

test("a secret or a fingerprint without cluster_isolated_filesystem is warned about as ignored", () => {
  const logs = new LogCapture();
  parseClusterConfig(base({ cluster_secret: "s" }), logs);
  assert.ok(logs.warnings().some((w) => /read only with cluster_isolated_filesystem/.test(w)));
});
