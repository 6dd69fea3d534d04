/**
 * The Prometheus endpoint of a running master: off by default; with `brine_metrics` it serves Salt's metric
 * names (Prometheus form) and brine's, and the counters move when a minion signs in, a job is published and
 * its return stored; `salt-run brine.stats` prints the same figures from the same board.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { isBrineError } from "../../src/shared/errors.js";
import { readMetricsOptions } from "../../src/main-thread/metrics-options.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { PublishClient } from "../../tools/swarm/publish-client.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys, waitForEvent } from "../helpers/minions.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { scrapeMetrics } from "../helpers/metrics.js";

async function scrape(tm: TestMaster): Promise<{ text: string; values: Map<string, number>; type: string | null }> {
  const m = await scrapeMetrics(tm);
  return { text: m.text, values: m.values, type: m.contentType };
}

describe("the metrics endpoint of a running master", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let minion: TestMinion;

  before(async () => {
    tm = await startTestMaster({ auto_accept: true, brine_metrics: { port: 0, host: "127.0.0.1" } });
  });
  after(async () => {
    await minion?.stop();
    await tm?.stop();
  });

  test("it serves Salt's and brine's metric names, and counters move with a sign-in, a publish and a return", async () => {
    const before = await scrape(tm);
    assert.match(before.type ?? "", /^text\/plain; version=0\.0\.4/);
    for (const name of [
      "salt_master_requests_handled_total",
      "salt_master_requests_duration_seconds",
      "salt_auth_attempts_total",
      "salt_jobs_published_total",
      "salt_jobs_completed_total",
      "salt_events_fired_total",
      "brine_request_lane_depth",
      "brine_request_lane_refused_total",
      "brine_send_queue_length",
      "brine_send_queue_dropped_total",
      "brine_publish_frames_total",
      "brine_sign_ins_resent_total",
      "brine_handshake_timeouts_total",
      "brine_publisher_total",
      "brine_event_bus_events_total",
      "brine_event_bus_readers",
      "brine_event_bus_readers_dropped_total",
      "brine_minions_connected",
      "process_open_fds",
      "process_resident_memory_bytes",
    ]) {
      assert.ok(before.text.includes(`# TYPE ${name} `), `${name} is served`);
    }
    // a master without cluster_id has no Raft, ring or nonce owner check to show
    for (const name of ["brine_raft_term", "brine_nonce_owner_total"]) assert.ok(!before.text.includes(`# TYPE ${name} `), `${name} is not served`);
    assert.equal(before.values.get('salt_auth_attempts_total{result="accept"}'), 0);
    assert.equal(before.values.get('brine_request_lane_refused_total{lane="clear",reason="queue_full"}'), 0);

    const [keys] = await testKeys(1);
    minion = fastMinion(tm, "metrics-1", keys!);
    await minion.start();
    const pc = new PublishClient({ host: "127.0.0.1", port: tm.retPort, key: tm.rootKey });
    const returned = waitForEvent(minion, "return", (r) => r.fun === "test.ping");
    await pc.publish({ tgt: "metrics-1", fun: "test.ping" });
    pc.close();
    await returned;
    // the return's reply leaves once its write is durable; the count is made before that
    let after = await scrape(tm);
    for (let i = 0; i < 50 && !after.values.get('salt_jobs_completed_total{fun="test.ping",success="true"}'); i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await scrape(tm);
    }
    const v = (k: string) => after.values.get(k) ?? 0;
    assert.ok(v('salt_auth_attempts_total{result="accept"}') >= 1, "the sign-in is counted");
    assert.ok(v('salt_master_requests_handled_total{cmd="_auth"}') >= 1);
    assert.equal(v('salt_master_requests_handled_total{cmd="publish"}'), 1);
    assert.ok(v('salt_master_requests_handled_total{cmd="_return"}') >= 1);
    assert.equal(v('salt_jobs_published_total{fun="test.ping"}'), 1);
    assert.equal(v('salt_jobs_completed_total{fun="test.ping",success="true"}'), 1);
    assert.ok(v('salt_events_fired_total{tag_prefix="salt/job"}') >= 3, "new, publish and ret events");
    assert.ok(v('salt_events_fired_total{tag_prefix="salt/auth"}') >= 1);
    assert.ok(v("brine_publish_frames_total") >= (before.values.get("brine_publish_frames_total") ?? 0) + 1, "the publish left on the publish port");
    // sampled every second like the frames: the one publish sealed and signed here, and no peer's frame
    assert.ok(v('brine_publisher_total{what="signed"}') >= 1 && v('brine_publisher_total{what="sealed"}') >= 1, "the publish was sealed and signed by this master");
    assert.equal(v('brine_publisher_total{what="passed"}'), 0);
    assert.ok(v("brine_event_bus_events_total") >= (before.values.get("brine_event_bus_events_total") ?? 0) + 3, "new, publish and ret events on the bus");
    assert.equal(v('brine_event_bus_readers_dropped_total{reason="queue_full"}'), 0);
    // the request duration histogram: cumulative buckets ending in +Inf = count
    const count = v('salt_master_requests_duration_seconds_count{cmd="publish"}');
    assert.equal(count, 1);
    assert.equal(v('salt_master_requests_duration_seconds_bucket{cmd="publish",le="+Inf"}'), count);
    assert.ok(v('salt_master_requests_duration_seconds_sum{cmd="publish"}') > 0);
    assert.ok(v("process_open_fds") > 0);
    // the board's counters only grow
    for (const [k, n] of before.values) if (/^(salt|brine)_\w+_total\b/.test(k)) assert.ok((after.values.get(k) ?? 0) >= n, k);
  });

  test("an unknown path is 404 and the metrics path answers HEAD", async () => {
    const r = await fetch(`http://127.0.0.1:${tm.server.metricsPort}/other`);
    assert.equal(r.status, 404);
    await r.text();
    const h = await fetch(`http://127.0.0.1:${tm.server.metricsPort}/metrics`, { method: "HEAD" });
    assert.equal(h.status, 200);
  });

  test("salt-run brine.stats prints the same figures, read from the same board", async () => {
    const conf = writeConfigDir(tm);
    const r = await runCli("salt-run", ["-c", conf, "brine.stats", "--out", "json"]);
    assert.equal(r.code, 0, r.stderr);
    const stats = JSON.parse(r.stdout) as Record<string, any>;
    const page = (await scrape(tm)).values;
    assert.equal(stats.salt_jobs_published_total['{fun="test.ping"}'], page.get('salt_jobs_published_total{fun="test.ping"}'));
    assert.equal(stats.salt_jobs_completed_total['{fun="test.ping",success="true"}'], 1);
    assert.equal(stats.salt_auth_attempts_total['{result="accept"}'], page.get('salt_auth_attempts_total{result="accept"}'));
    assert.equal(stats.salt_master_requests_duration_seconds['{cmd="publish"}'].count, 1);
    assert.ok(typeof stats.process_open_fds === "number" && stats.process_open_fds > 0);
    assert.ok("brine_request_lane_depth" in stats && "brine_minions_connected" in stats);
    // the runner call itself fired salt/run/<jid>/new and /ret on this master (/ret once its job record is
    // committed, which may be after the caller has its answer)
    const runEvents = async () => (await scrape(tm)).values.get('salt_events_fired_total{tag_prefix="salt/run"}') ?? 0;
    for (const until = Date.now() + 10_000; (await runEvents()) < 2 && Date.now() < until; ) await new Promise((res) => setTimeout(res, 100));
    assert.ok((await runEvents()) >= 2);
  });
});

describe("the metrics endpoint is off by default", { timeout: 60_000 }, () => {
  test("a master without brine_metrics serves no endpoint, and brine_metrics: false is off too", async () => {
    assert.equal(readMetricsOptions(masterDefaults()), undefined);
    assert.equal(readMetricsOptions({ ...masterDefaults(), brine_metrics: false }), undefined);
    const tm = await startTestMaster();
    try {
      assert.equal(tm.server.metricsPort, undefined);
      await assert.rejects(fetch("http://127.0.0.1:9108/metrics", { signal: AbortSignal.timeout(2000) }));
    } finally {
      await tm.stop();
    }
  });

  test("one line turns it on; a bad value stops the start naming the option", async () => {
    assert.deepEqual(readMetricsOptions({ ...masterDefaults(), brine_metrics: true }), { port: 9108, host: "127.0.0.1", path: "/metrics" });
    assert.deepEqual(readMetricsOptions({ ...masterDefaults(), brine_metrics: { port: 9200 } }), { port: 9200, host: "127.0.0.1", path: "/metrics" });
    for (const bad of [{ port: 70000 }, { port: "x" }, { prot: 9108 }, { path: "metrics" }, "yes"]) {
      assert.throws(
        () => readMetricsOptions({ ...masterDefaults(), brine_metrics: bad as never }),
        (e: unknown) => isBrineError(e, "CONFIG_INVALID") && e.message.includes("brine_metrics"),
        JSON.stringify(bad),
      );
    }
    await assert.rejects(startTestMaster({ brine_metrics: { port: -1 } }), (e: unknown) => isBrineError(e, "CONFIG_INVALID"));
  });
});
