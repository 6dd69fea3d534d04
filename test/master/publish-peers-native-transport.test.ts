/**
 * With brine's own ZMTP transport (`brine_minion_transport: native`) the publish port's subscribers are known to
 * the master itself: the ZMTP server tells the request threads' board of each as it comes and goes (live), so no
 * request thread reads /proc/net/tcp, and a publish still names the matched minion that is not connected.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";

test("the native transport feeds its subscribers' addresses to the board, and a publish names the minion that left", { timeout: 90_000 }, async () => {
  const tm = await startTestMaster({ auto_accept: true, worker_threads: 2, brine_minion_transport: "native" });
  const minions: TestMinion[] = [];
  try {
    await nativeTransportCase(tm, minions);
  } finally {
    for (const m of minions) await m.stop().catch(() => undefined);
    await tm.stop().catch(() => undefined);
  }
});

async function nativeTransportCase(tm: TestMaster, minions: TestMinion[]): Promise<void> {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const [k1, k2] = await testKeys(2);
  const here = fastMinion(tm, "nt-here", k1!, { sourceIp: "127.0.0.91", grains: { id: "nt-here", ipv4: ["127.0.0.91"] } });
  const gone = fastMinion(tm, "nt-gone", k2!, { sourceIp: "127.0.0.92", grains: { id: "nt-gone", ipv4: ["127.0.0.92"] } });
  minions.push(here, gone);
  await Promise.all([here.start(), gone.start()]);
  const board = tm.server.publishPeers;
  const addrs = () => [...(board.view().addrs ?? [])].sort();
  for (const end = Date.now() + 10_000; !(addrs().includes("127.0.0.91") && addrs().includes("127.0.0.92")) && Date.now() < end; ) await sleep(100);
  assert.equal(board.view().live, true, "fed by the transport");
  assert.deepEqual(addrs(), ["127.0.0.91", "127.0.0.92"]);
  await gone.stop();
  for (const end = Date.now() + 10_000; addrs().includes("127.0.0.92") && Date.now() < end; ) await sleep(100);
  assert.deepEqual(addrs(), ["127.0.0.91"], "a subscriber that left is gone from the board within the poll");

  const bus = new EventClient(tm.sockDir);
  await bus.connect();
  let notConnected: unknown;
  bus.on((e) => {
    if (/^salt\/job\/\d+\/new$/.test(e.tag)) notConnected = (e.data as Record<string, unknown>).not_connected;
  });
  try {
    const r = await runCli("salt", ["-c", writeConfigDir(tm), "nt-*", "test.ping", "--out", "json", "-t", "3", "--gather-job-timeout", "1"]);
    assert.match(r.stdout, /"nt-here": true/);
    assert.match(r.stdout, /"nt-gone": "Minion did not return. \[Not connected\]"/);
    assert.deepEqual(notConnected, ["nt-gone"], "named when the job was published");
  } finally {
    bus.close();
  }
}
