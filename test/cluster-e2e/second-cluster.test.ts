/**
 * Two isolated-filesystem clusters founded with one cluster_id (each master founded alone, unable to see the
 * other), then one lists the other in cluster_peers: its handshakes are refused as an unknown peer, so it probes
 * the peer with the join exchange as far as the CHALLENGE, sees another cluster key, and both masters log the
 * second cluster as such ("another-cluster"), not as a fingerprint mismatch. Nothing is written on either side.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startTestMaster, freePort, type TestMaster } from "../helpers/master.js";
import { until } from "../../tools/local-cluster.js";
import type { MasterConfig } from "../../src/shared/config/defaults.js";

const HOSTS = ["127.0.0.236", "127.0.0.237"];

test("a second cluster founded with the same cluster_id is named as such on both sides when its masters meet, and nothing is written", { timeout: 120_000 }, async () => {
  const top = mkdtempSync(path.join(os.tmpdir(), "brine-second-cluster-"));
  const ports = await Promise.all(HOSTS.map((h) => freePort(h)));
  const logFile = path.join(top, "masters.log");
  const base = (i: number, over: Partial<MasterConfig> = {}): Partial<MasterConfig> => ({
    id: `twin${i + 1}`,
    interface: HOSTS[i]!,
    cluster_id: "twins",
    cluster_isolated_filesystem: true,
    cluster_secret: "one secret",
    cluster_pool_port: ports[i]!,
    ...over,
  });
  const root = (i: number) => path.join(top, `m${i + 1}`);
  const masters: TestMaster[] = [];
  try {
    // each founds alone: two clusters named "twins", two keys
    masters.push(await startTestMaster(base(0), root(0), { logFile }));
    masters.push(await startTestMaster(base(1), root(1), { logFile }));
    const pub = (m: TestMaster) => readFileSync(path.join(m.pkiDir, "cluster.pub"), "utf8");
    assert.notEqual(pub(masters[0]!), pub(masters[1]!));

    // twin1 comes back listing twin2 as a peer: twin2 does not know its key, and the probe shows why
    await masters[0]!.stop(true);
    masters[0] = await startTestMaster(base(0, { cluster_peers: [`${HOSTS[1]}:${ports[1]}`] }), root(0), { logFile });
    const said = await until("both sides to name the second cluster", async () => {
      const text = readFileSync(logFile, "utf8");
      return /SECOND CLUSTER at 127\.0\.0\.237:\d+: twin2 is in a second cluster named "twins" with another key/.test(text) && /cluster join: twin1 refused this cluster \(another-cluster\)/.test(text) ? text : undefined;
    }, 60_000, 500);
    assert.doesNotMatch(said, /\(fingerprint\)/, "not reported as a fingerprint mismatch");
    assert.ok(!existsSync(path.join(masters[1]!.pkiDir, "peers", "twin1.pub")), "twin2 wrote no key for twin1");
    assert.ok(!existsSync(path.join(masters[0]!.pkiDir, "peers", "twin2.pub")), "twin1 wrote no key for twin2");
    assert.equal(readFileSync(path.join(masters[0]!.pkiDir, "cluster.pub"), "utf8") === pub(masters[1]!), false, "each keeps its own cluster key");
  } finally {
    await Promise.all(masters.map((m) => m.stop().catch(() => undefined)));
    rmSync(top, { recursive: true, force: true });
  }
});
