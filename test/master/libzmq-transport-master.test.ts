/**
 * A master with `brine_minion_transport: libzmq` named explicitly, now that brine's own ZMTP server is the default
 * (the whole minion-facing suite still runs on libzmq with BRINE_TEST_MINION_TRANSPORT=libzmq): v3 and v2 minions
 * answer a job through the salt CLI, and a minion that left is reported "[Not connected]", known from the kernel's
 * TCP table (this transport does not know its connections; the native one feeds them to the board itself,
 * test/master/publish-peers-native-transport).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { startTestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

test("libzmq transport: v3 and v2 minions answer a job; a minion that left is reported not connected", { timeout: 180_000 }, async () => {
  const tm = await startTestMaster({ auto_accept: true, worker_threads: 2, brine_minion_transport: "libzmq" });
  assert.equal(tm.cfg.brine_minion_transport, "libzmq");
  const [k1, k2, k3] = await testKeys(3);
  const minions = [
    fastMinion(tm, "lz-a", k1!),
    fastMinion(tm, "lz-b", k2!, { protocol: "v2" }),
    fastMinion(tm, "lz-gone", k3!, { sourceIp: "127.0.0.93", grains: { id: "lz-gone", ipv4: ["127.0.0.93"] } }),
  ];
  try {
    await Promise.all(minions.map((m) => m.start()));
    const conf = writeConfigDir(tm);
    const r = await runCli("salt", ["-c", conf, "lz-*", "test.ping", "--out", "json", "-t", "15"]);
    assert.equal(r.code, 0, r.stderr);
    for (const id of ["lz-a", "lz-b", "lz-gone"]) assert.match(r.stdout, new RegExp(`"${id}": true`));
    assert.equal(tm.server.publishPeers.view().live, false, "libzmq does not feed the board: a publish reads the kernel's table");

    await minions[2]!.stop();
    const again = await runCli("salt", ["-c", conf, "lz-*", "test.ping", "--out", "json", "-t", "3", "--gather-job-timeout", "1"]);
    assert.match(again.stdout, /"lz-a": true/);
    assert.match(again.stdout, /"lz-b": true/);
    assert.match(again.stdout, /"lz-gone": "Minion did not return. \[Not connected\]"/);
  } finally {
    await Promise.all(minions.map((m) => m.stop().catch(() => undefined)));
    await tm.stop();
  }
});
