/**
 * The API thread's bus feed: connected only while someone listens (an idle API decodes none of a busy
 * master's events), events reach a subscriber once ready() resolved, the connection closes after the
 * idle delay, and a missing bus is a coded error (answered 503), not a hang.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { EventBusServer } from "../../src/main-thread/bus-server.js";
import { packEvent, type BusEvent } from "../../src/shared/event-frame.js";
import { BusFeed } from "../../src/api/bus-feed.js";
import { isBrineError } from "../../src/shared/errors.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("the bus feed connects for its listeners only and closes after the idle delay", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-busfeed-"));
  const bus = new EventBusServer(dir);
  await bus.start();
  const feed = new BusFeed(dir, 50);
  try {
    bus.publish([packEvent("before/anyone", {})]);
    await sleep(50);
    assert.equal(feed.connected, false, "nobody listens: no connection");
    const got: BusEvent[] = [];
    const off = feed.subscribe((e) => got.push(e));
    await feed.ready();
    assert.equal(feed.connected, true);
    bus.publish([packEvent("salt/job/1/new", { minions: ["m1"] })]);
    for (let i = 0; i < 50 && got.length === 0; i++) await sleep(10);
    assert.deepEqual(got.map((e) => e.tag), ["salt/job/1/new"]);
    off();
    assert.equal(feed.connected, true, "kept for the next call during the idle delay");
    await sleep(120);
    assert.equal(feed.connected, false, "closed after the idle delay");
    const again = feed.subscribe(() => undefined);
    await feed.ready();
    assert.equal(feed.connected, true, "a new listener reconnects");
    again();
  } finally {
    feed.close();
    await bus.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a bus that is not there makes ready() fail with API_MASTER", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-busfeed-"));
  const feed = new BusFeed(dir, 50);
  try {
    const off = feed.subscribe(() => undefined);
    await assert.rejects(feed.ready(), (e) => isBrineError(e, "API_MASTER"));
    off();
  } finally {
    feed.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
