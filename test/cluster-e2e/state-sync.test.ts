/**
 * State-sync on an isolated filesystem (issue 15): three masters behind HAProxy, each with its own
 * `cluster_pki_dir` (minion keys), `cachedir`, `file_roots` and `pillar_roots`; nothing on disk is shared.
 * (The cluster key pair and the peers' public keys are seeded into each master's directory, as the join will
 * hand them out.)
 *
 * 1. a key accepted with salt-key on one master appears accepted on all, and leaves pending everywhere; deleted
 *    on another, it disappears on all, each within 30 s, with no runner called;
 *    (a key rejected on one is rejected on all, too);
 * 2. files added, edited and removed in master 1's file_roots reach the others with `cluster.sync_roots`, whose
 *    result names each peer with what it installed and deleted; a symlink in the way on one peer is refused
 *    there (and named in that peer's result), nothing written through it;
 *    `cluster.collect_from_peers` brings each peer's own runner jobs into master 1's job cache, once;
 * 3. a master killed in the middle of a large file's transfer resumes it from its partial file after a restart,
 *    and every master ends with the same roots.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ClusterHarness, clusterPrerequisites, sleep, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.170";
const HOSTS = ["127.0.0.171", "127.0.0.172", "127.0.0.173"];
const IDS = ["m1", "m2", "m3"];
/** issue 15: a key change reaches every master within this, ms */
const CONVERGE_MS = 30_000;

function pair(): { pem: string; pub: string } {
  const k = generateKeyPairSync("rsa", { modulusLength: 2048, publicKeyEncoding: { type: "spki", format: "pem" }, privateKeyEncoding: { type: "pkcs1", format: "pem" } });
  return { pem: k.privateKey, pub: k.publicKey };
}

/** Every master its own pki_dir and cluster_pki_dir, holding the same cluster pair and every master's public key. */
function seed(root: string): void {
  const cluster = pair();
  const masters = IDS.map(() => pair());
  IDS.forEach((id, i) => {
    const pki = path.join(root, id, "pki");
    const cpki = path.join(root, id, "cpki");
    mkdirSync(path.join(cpki, "peers"), { recursive: true });
    mkdirSync(pki, { recursive: true });
    writeFileSync(path.join(pki, "master.pem"), masters[i]!.pem, { mode: 0o400 });
    writeFileSync(path.join(pki, "master.pub"), masters[i]!.pub);
    writeFileSync(path.join(cpki, "cluster.pem"), cluster.pem, { mode: 0o400 });
    writeFileSync(path.join(cpki, "cluster.pub"), cluster.pub);
    IDS.forEach((peer, j) => writeFileSync(path.join(cpki, "peers", `${peer}.pub`), masters[j]!.pub));
    mkdirSync(path.join(root, id, "srv", "salt"), { recursive: true });
  });
}

/** item path → sha256 of every file under `dir` (partial files excluded). */
function tree(dir: string, prefix = ""): Record<string, string> {
  const out: Record<string, string> = {};
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir).sort()) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) Object.assign(out, tree(full, `${prefix}${name}/`));
    else if (!name.startsWith(".brine-part-")) out[`${prefix}${name}`] = createHash("sha256").update(readFileSync(full)).digest("hex");
  }
  return out;
}

test("keys converge by themselves and roots by sync_roots across three masters that share no directory; a master killed mid-transfer resumes", { timeout: 420_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-statesync-e2e-"));
  seed(root);
  const dirOf = (i: number) => path.join(root, IDS[i]!);
  const keyFile = (i: number, sub: string, id: string) => path.join(dirOf(i), "cpki", sub, id);
  const srv = (i: number) => path.join(dirOf(i), "srv", "salt");
  const h = await ClusterHarness.start({
    lbHost: LB,
    hosts: HOSTS,
    clusterId: "brine-statesync",
    privateCachedir: true,
    root,
    extra: { auto_accept: false },
    perMaster: (_m, dir) => ({ cluster_pki_dir: path.join(dir, "cpki"), file_roots: { base: [path.join(dir, "srv", "salt")] }, pillar_roots: { base: [path.join(dir, "srv", "pillar")] } }),
  });
  try {
    await h.waitLeader([0, 1, 2], 3);

    // 1. keys: accepted on m1 -> accepted everywhere, pending nowhere; deleted on m2 -> gone everywhere
    const minionPub = pair().pub;
    mkdirSync(path.join(dirOf(0), "cpki", "minions_pre"), { recursive: true });
    writeFileSync(keyFile(0, "minions_pre", "ss-minion"), minionPub);
    const accepted = await h.saltKey(0, ["-a", "ss-minion", "-y"]);
    assert.equal(accepted.code, 0, accepted.stderr);
    let t0 = Date.now();
    await until("the accepted key on every master", async () => ([0, 1, 2].every((i) => existsSync(keyFile(i, "minions", "ss-minion")) && !existsSync(keyFile(i, "minions_pre", "ss-minion"))) ? true : undefined), CONVERGE_MS, 200);
    assert.ok(Date.now() - t0 < CONVERGE_MS);
    for (const i of [1, 2]) assert.equal(readFileSync(keyFile(i, "minions", "ss-minion"), "utf8"), minionPub);
    const listed = await h.saltKey(2, ["-L", "--out", "json"]);
    assert.deepEqual(JSON.parse(listed.stdout).minions, ["ss-minion"], "salt-key on another master lists it accepted");

    const deleted = await h.saltKey(1, ["-d", "ss-minion", "-y"]);
    assert.equal(deleted.code, 0, deleted.stderr);
    t0 = Date.now();
    await until("the deleted key gone from every master", async () => ([0, 1, 2].every((i) => !existsSync(keyFile(i, "minions", "ss-minion"))) ? true : undefined), CONVERGE_MS, 200);
    assert.ok(Date.now() - t0 < CONVERGE_MS);

    // a pending key (a minion that signed in at m3) rejected on m3 is rejected everywhere
    mkdirSync(path.join(dirOf(2), "cpki", "minions_pre"), { recursive: true });
    writeFileSync(keyFile(2, "minions_pre", "ss-other"), pair().pub);
    await until("the pending key on every master", async () => ([0, 1].every((i) => existsSync(keyFile(i, "minions_pre", "ss-other"))) ? true : undefined), CONVERGE_MS, 200);
    const rejected = await h.saltKey(2, ["-r", "ss-other", "-y"]);
    assert.equal(rejected.code, 0, rejected.stderr);
    await until("the rejected key on every master", async () => ([0, 1, 2].every((i) => existsSync(keyFile(i, "minions_rejected", "ss-other")) && !existsSync(keyFile(i, "minions_pre", "ss-other"))) ? true : undefined), CONVERGE_MS, 200);

    // collect_from_peers: the runner jobs each master stored for itself (cluster.members above; runner jobs are
    // not forwarded) are added to m1's job cache, once
    const collected = await h.clusterRunner(0, "collect_from_peers", ["channels=keys"]);
    assert.deepEqual(Object.keys(collected).sort(), ["m2", "m3"]);
    for (const p of ["m2", "m3"]) {
      assert.deepEqual(collected[p].errors, [], JSON.stringify(collected));
      assert.ok(collected[p].items >= 2, `m1 got ${p}'s own runner jobs (load and end time): ${JSON.stringify(collected[p])}`);
    }
    const again = await h.clusterRunner(0, "collect_from_peers");
    for (const p of ["m2", "m3"]) assert.equal(again[p].items, 0, `nothing new the second time: ${JSON.stringify(again)}`);

    // 2. roots: added, then edited and removed on m1, carried by sync_roots; the result names each peer
    mkdirSync(path.join(srv(0), "web"), { recursive: true });
    writeFileSync(path.join(srv(0), "top.sls"), "base:\n  '*':\n    - web\n");
    writeFileSync(path.join(srv(0), "web", "init.sls"), "nginx:\n  pkg.installed\n");
    writeFileSync(path.join(srv(0), "web", "old.sls"), "old: true\n");
    const first = await h.clusterRunner(0, "sync_roots", ["roots=file"]);
    assert.deepEqual(Object.keys(first).sort(), ["m2", "m3"]);
    for (const p of ["m2", "m3"]) {
      assert.equal(first[p].items, 3, JSON.stringify(first));
      assert.deepEqual(first[p].errors, []);
      assert.equal(typeof first[p].ms, "number");
    }
    assert.deepEqual(tree(srv(1)), tree(srv(0)));
    assert.deepEqual(tree(srv(2)), tree(srv(0)));

    writeFileSync(path.join(srv(0), "web", "init.sls"), "nginx:\n  pkg.latest\n");
    rmSync(path.join(srv(0), "web", "old.sls"));
    const second = await h.clusterRunner(0, "sync_roots");
    for (const p of ["m2", "m3"]) {
      assert.equal(second[p].items, 1, JSON.stringify(second));
      assert.equal(second[p].deleted, 1, JSON.stringify(second));
    }
    assert.equal(readFileSync(path.join(srv(2), "web", "init.sls"), "utf8"), "nginx:\n  pkg.latest\n");
    assert.ok(!existsSync(path.join(srv(1), "web", "old.sls")));
    // m3 has a symlink where m1 has a directory: nothing is written through it, and the result says so
    const outside = path.join(root, "outside");
    mkdirSync(outside);
    symlinkSync(outside, path.join(srv(2), "linked"));
    mkdirSync(path.join(srv(0), "linked"));
    writeFileSync(path.join(srv(0), "linked", "x.sls"), "x: 1\n");
    const third = await h.clusterRunner(0, "sync_roots", ["roots=file"]);
    assert.equal(third.m2.items, 1);
    assert.deepEqual(third.m2.errors, []);
    assert.equal(third.m3.items, 0);
    assert.match(third.m3.errors.join("\n"), /linked is a symlink \(refused/);
    assert.deepEqual(readdirSync(outside), []);
    rmSync(path.join(srv(2), "linked"));
    rmSync(path.join(srv(0), "linked"), { recursive: true });
    const status = JSON.parse(readFileSync(path.join(dirOf(1), "cache", "brine-state-sync", "status.json"), "utf8"));
    assert.equal(status.file_roots.m1.items, 1);

    // 3. m2 killed in the middle of a large file; restarted, it resumes from its partial file
    const big = Buffer.alloc(160 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 512) big.writeUInt32LE(i, i);
    writeFileSync(path.join(srv(0), "big.bin"), big);
    const running = h.clusterRunner(0, "sync_roots", ["roots=file"]);
    const part = await until("m2's partial file to grow", async () => {
      const f = readdirSync(srv(1)).find((n) => n.startsWith(".brine-part-"));
      return f && statSync(path.join(srv(1), f)).size >= 8 * 1024 * 1024 ? f : undefined;
    }, 120_000, 20);
    h.kill(1);
    await h.waitExit(1);
    const partial = statSync(path.join(srv(1), part)).size;
    assert.ok(partial < big.length, "killed before the end");
    const cut = await running;
    assert.ok(cut.m2.errors.length > 0, `the killed master is listed with its error: ${JSON.stringify(cut.m2)}`);
    assert.deepEqual(cut.m2.failed, ["file_roots"]);
    await h.startMaster(1);
    const resumed = await until("sync_roots to reach the restarted m2", async () => {
      const r = await h.clusterRunner(0, "sync_roots", ["roots=file"]);
      return r.m2.errors.length === 0 ? r : undefined;
    }, 120_000, 1000);
    assert.equal(resumed.m2.items, 1);
    assert.ok(resumed.m2.bytes <= big.length - partial, `only the rest was fetched (${resumed.m2.bytes} bytes, ${partial} were there)`);
    assert.match(readFileSync(h.masters[1]!.logFile, "utf8"), /resuming base\/big\.bin at byte \d+/);
    const m1 = tree(srv(0));
    assert.deepEqual(tree(srv(1)), m1);
    assert.deepEqual(tree(srv(2)), m1);
  } finally {
    await h.stop();
    await sleep(100);
  }
});
