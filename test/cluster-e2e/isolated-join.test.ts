/**
 * Isolated-filesystem join (cluster_isolated_filesystem): every master has its own directories. m1 starts alone
 * and founds; m2 and m3 join it from empty directories with the secret and the fingerprint `salt-key -F` prints;
 * a 4th master that lists only m2 joins, becomes a voter everywhere, and every member holds its key. A master
 * with a wrong secret (in-process) and a salt-master process with a wrong fingerprint are refused: the start fails
 * with CLUSTER_JOIN_TIMEOUT after cluster_join_timeout, the process exits non-zero, each naming the reason, and
 * nothing is written on either side; a replayed DISCOVER is refused by the member it reaches.
 * The 4th pulls the roots of the member that admitted it before its promotion. `salt-key -F` prints the cluster.pub line that is pinned; `salt-run cluster.remove_member id=iso4` takes the 4th
 * out of Raft and every member forgets its key. A member restarted with its cachedir wiped rejoins within 60 s.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { stringify } from "yaml";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import * as zmq from "zeromq";
import { JoinerExchange, peekRefusal } from "../../src/workers/raft/peer/join.js";
import os from "node:os";
import path from "node:path";
import { startTestMaster, freePort, type TestMaster } from "../helpers/master.js";
import { CLUSTER_RING } from "../../src/shared/sab-ring/layout.js";
import { pemFinger } from "../../src/shared/protocol/pem.js";
import { until } from "../../tools/local-cluster.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import type { MasterConfig } from "../../src/shared/config/defaults.js";

const HOSTS = ["127.0.0.181", "127.0.0.182", "127.0.0.183", "127.0.0.184", "127.0.0.185", "127.0.0.186"];

test("a 4th master joins a running 3-master isolated cluster from empty directories and is removed with remove_member; a wrong secret, a wrong fingerprint or a replayed join is refused with nothing written", { timeout: 180_000 }, async () => {
  const top = mkdtempSync(path.join(os.tmpdir(), "brine-isojoin-"));
  const ports = await Promise.all(HOSTS.map((h) => freePort(h)));
  const masters: TestMaster[] = [];
  const addr = (i: number) => `${HOSTS[i]}:${ports[i]}`;
  const base = (i: number, over: Partial<MasterConfig> = {}): Partial<MasterConfig> => ({
    id: `iso${i + 1}`,
    interface: HOSTS[i]!,
    cluster_id: "iso",
    cluster_isolated_filesystem: true,
    cluster_secret: "correct horse",
    cluster_pool_port: ports[i]!,
    ...over,
  });
  const members = async (m: TestMaster) => (await m.server.clusterNode!.raft.status()).groups.find((g) => g.group === CLUSTER_RING);
  const root = (i: number) => path.join(top, `m${i + 1}`);
  // every master's log in one file, left behind with the directory if the process dies
  const logFile = path.join(top, "masters.log");
  try {
    masters.push(await startTestMaster(base(0), root(0), { logFile }));
    assert.deepEqual((await members(masters[0]!))?.voters, ["iso1"], "alone, with no peers, it founds");
    const clusterPub = readFileSync(path.join(masters[0]!.pkiDir, "cluster.pub"), "utf8");
    const fp = pemFinger(clusterPub, "sha256");

    masters.push(await startTestMaster(base(1, { cluster_peers: [addr(0)], cluster_pub_fingerprint: fp }), root(1), { logFile }));
    masters.push(await startTestMaster(base(2, { cluster_peers: [addr(0)], cluster_pub_fingerprint: fp.replace(/:/g, "").toUpperCase() }), root(2), { logFile }));
    await until("three voters everywhere", async () => {
      const v = await Promise.all(masters.map(members));
      return v.every((g) => JSON.stringify(g?.voters) === JSON.stringify(["iso1", "iso2", "iso3"])) ? true : undefined;
    }, 60_000, 200);
    for (const m of masters.slice(1)) assert.equal(readFileSync(path.join(m.pkiDir, "cluster.pub"), "utf8"), clusterPub, "the joiner holds the cluster's key, not one of its own");

    // something in iso2's roots that only the join's state-sync can bring (roots travel at join or with sync_roots)
    writeFileSync(path.join(root(1), "srv", "salt", "joined.sls"), "joined:\n  test.succeed_without_changes\n");
    // the 4th lists only iso2
    masters.push(await startTestMaster(base(3, { cluster_peers: [addr(1)], cluster_pub_fingerprint: fp }), root(3), { logFile }));
    await until("iso4 a voter everywhere with one leader", async () => {
      const v = await Promise.all(masters.map(members));
      const leader = v[0]?.leaderId;
      return leader && v.every((g) => JSON.stringify(g?.voters) === JSON.stringify(["iso1", "iso2", "iso3", "iso4"]) && g?.leaderId === leader) ? true : undefined;
    }, 60_000, 200);
    assert.equal(readFileSync(path.join(root(3), "srv", "salt", "joined.sls"), "utf8"), "joined:\n  test.succeed_without_changes\n", "iso4 pulled the roots before its promotion");
    await until("every member holds iso4's key (from the cluster log)", async () => (masters.slice(0, 3).every((m) => existsSync(path.join(m.pkiDir, "peers", "iso4.pub"))) ? true : undefined), 10_000, 100);
    assert.equal(readFileSync(path.join(masters[3]!.pkiDir, ".aes"), "utf8"), readFileSync(path.join(masters[0]!.pkiDir, ".aes"), "utf8"), "one publish AES key");

    // salt-key -F on a member prints the cluster.pub line an operator pins
    const keys = await runCli("salt-key", ["-c", writeConfigDir(masters[1]!), "-F"]);
    assert.equal(keys.code, 0, keys.stderr);
    assert.ok(keys.stdout.split("\n").includes(`cluster.pub:  ${fp}`), keys.stdout);

    // remove_member on the leader: out of Raft, and every master forgets iso4's key
    const leaderId = (await members(masters[0]!))!.leaderId!;
    const leader = masters.find((m) => m.cfg.id === leaderId)!;
    const removed = await runCli("salt-run", ["-c", writeConfigDir(leader), "cluster.remove_member", "id=iso4", "--out", "json"]);
    assert.equal(removed.code, 0, removed.stderr + removed.stdout);
    const out = JSON.parse(removed.stdout) as { status: string; data: { removed: string; key_forgotten_at: number } };
    assert.equal(out.status, "committed");
    assert.equal(out.data.removed, "iso4");
    assert.ok(out.data.key_forgotten_at > 0);
    await until("iso4 out of every remaining member's group, its key forgotten everywhere", async () => {
      const v = await Promise.all(masters.slice(0, 3).map(members));
      const out = v.every((g) => JSON.stringify(g?.voters) === JSON.stringify(["iso1", "iso2", "iso3"]) && !g?.learners.includes("iso4"));
      return out && masters.slice(0, 3).every((m) => !existsSync(path.join(m.pkiDir, "peers", "iso4.pub"))) ? true : undefined;
    }, 30_000, 200);
    await masters.pop()!.stop();

    // iso3 restarts with its cachedir wiped (Raft log gone, keys kept): it rejoins through the members
    const iso3 = masters[2]!;
    await iso3.stop(true);
    rmSync(iso3.cachedir, { recursive: true, force: true });
    masters[2] = await startTestMaster(base(2, { cluster_peers: [addr(0)], cluster_pub_fingerprint: fp }), root(2), { logFile });
    await until("iso3 whole again: a voter with the cluster's log", async () => {
      const v = await Promise.all(masters.map(members));
      const leader = v[0]!;
      return v.every((g) => JSON.stringify(g?.voters) === JSON.stringify(["iso1", "iso2", "iso3"])) && v[2]!.applied >= leader.commit - 1 ? true : undefined;
    }, 60_000, 200);

    // wrong secret, then wrong fingerprint: start fails after cluster_join_timeout, naming why; nothing written
    const refusedStart = async (i: number, over: Partial<MasterConfig>, why: RegExp) => {
      await assert.rejects(startTestMaster(base(i, { cluster_peers: [addr(0)], cluster_pub_fingerprint: fp, cluster_join_timeout: 5, ...over }), root(i)), (e: Error & { code?: string }) => {
        assert.equal(e.code, "CLUSTER_JOIN_TIMEOUT", e.message);
        assert.match(e.message, why);
        return true;
      });
      assert.ok(!existsSync(path.join(root(i), "pki", "master", "cluster.pem")), "no cluster key written on the refused master");
      assert.ok(!existsSync(path.join(root(i), "pki", "master", "peers", "iso1.pub")), "no member key written on the refused master");
      for (const m of masters) assert.ok(!existsSync(path.join(m.pkiDir, "peers", `iso${i + 1}.pub`)), `${m.cfg.id} wrote no key for the refused master`);
    };
    await refusedStart(4, { cluster_secret: "wrong horse" }, /refused this master: .*secret/);
    // the wrong fingerprint as a real salt-master process: it exits non-zero with the reason
    const dir6 = root(5);
    const etc = path.join(dir6, "etc", "salt");
    mkdirSync(etc, { recursive: true });
    writeFileSync(
      path.join(etc, "master"),
      stringify({
        worker_threads: 1,
        ...base(5, { cluster_peers: [addr(0)], cluster_pub_fingerprint: pemFinger(clusterPub, "md5"), cluster_join_timeout: 4 }),
        pki_dir: path.join(dir6, "pki", "master"),
        cachedir: path.join(dir6, "cache"),
        sock_dir: path.join(dir6, "sock"),
        log_file: path.join(dir6, "log", "master"),
        pidfile: path.join(dir6, "salt-master.pid"),
        file_roots: { base: [path.join(dir6, "srv", "salt")] },
        pillar_roots: { base: [path.join(dir6, "srv", "pillar")] },
        ret_port: await freePort(HOSTS[5]),
        publish_port: await freePort(HOSTS[5]),
      }),
    );
    const proc = await runCli("salt-master", ["-c", etc, "-l", "info"], { timeoutMs: 60_000 });
    const said = proc.stdout + proc.stderr;
    assert.ok(proc.code !== 0 && proc.code !== null, `exit code ${proc.code}: ${said}`);
    assert.match(said, /cluster_join_timeout \(4 s\).*fingerprint/s);
    assert.ok(!existsSync(path.join(dir6, "pki", "master", "cluster.pem")), "no cluster key written by the refused process");
    for (const m of masters) assert.ok(!existsSync(path.join(m.pkiDir, "peers", "iso6.pub")), `${m.cfg.id} wrote no key for it`);

    // a replayed DISCOVER is refused on sight by the member, and nothing is written for it
    const k = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const ex = new JoinerExchange({ clusterId: "iso", selfId: "replayer", listen: { host: HOSTS[5]!, port: ports[5]! }, privateKey: k.privateKey, publicKey: k.publicKey, secret: "correct horse", pin: { fingerprint: fp, hashType: "sha256" }, now: Date.now, random: (n) => randomBytes(n) });
    const exchange = async (frame: Uint8Array): Promise<Uint8Array> => {
      const d = new zmq.Dealer({ receiveTimeout: 20_000, linger: 0 });
      try {
        d.connect(`tcp://${addr(0)}`);
        await d.send(frame);
        const [reply] = await d.receive();
        return reply!;
      } finally {
        d.close();
      }
    };
    assert.equal(peekRefusal(await exchange(ex.discover)), undefined, "the first DISCOVER is answered with a challenge");
    assert.equal(peekRefusal(await exchange(ex.discover))?.reason, "replay");
    for (const m of masters) assert.ok(!existsSync(path.join(m.pkiDir, "peers", "replayer.pub")), `${m.cfg.id} wrote nothing for the replayed join`);
  } finally {
    await Promise.all(masters.map((m) => m.stop().catch(() => undefined)));
    rmSync(top, { recursive: true, force: true });
  }
});
