/**
 * The event bus (src/main-thread/bus-server.ts) with eight readers on its socket, one of which stops reading:
 * the stuck one is disconnected and counted while the other seven get every event, byte for byte; a reader
 * that holds a few events past publish_drain_timeout is dropped at the next publish (clock injected); a reader
 * behind by more bytes than the byte bound is dropped whatever its count.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { EventBusServer } from "../../src/main-thread/bus-server.js";
import { packEvent } from "../../src/shared/event-frame.js";

const tick = () => new Promise((r) => setImmediate(r));

async function withBus(limits: ConstructorParameters<typeof EventBusServer>[1], now: () => number, f: (bus: EventBusServer) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-bus-"));
  const bus = new EventBusServer(dir, limits, now);
  await bus.start();
  try {
    await f(bus);
  } finally {
    await bus.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

interface Reader {
  s: net.Socket;
  bytes: number;
  closed: boolean;
}

async function connect(bus: EventBusServer, n: number): Promise<Reader[]> {
  const readers: Reader[] = [];
  for (let i = 0; i < n; i++) {
    const s = net.connect(bus.path);
    const r: Reader = { s, bytes: 0, closed: false };
    s.on("data", (d: Buffer) => (r.bytes += d.length));
    s.on("close", () => (r.closed = true));
    s.on("error", () => undefined);
    await new Promise((res) => s.once("connect", res));
    readers.push(r);
  }
  for (let i = 0; i < 100 && bus.subscribers < n; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(bus.subscribers, n);
  return readers;
}

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), what);
}

describe("event bus readers that stop reading", { timeout: 60_000 }, () => {
  test("of 8 readers, the one that stops reading is dropped and counted; the other 7 get every event", async () => {
    await withBus({ queueSize: 500, drainTimeoutMs: 5000, backlogBytesMax: 64 * 2 ** 20 }, Date.now, async (bus) => {
      const readers = await connect(bus, 8);
      const stuck = readers[3]!;
      stuck.s.pause();
      const frame = packEvent("salt/job/20261125000000000000/ret/minion-1", { return: "x".repeat(900), retcode: 0, success: true });
      const events = 5000;
      for (let i = 0; i < events; i += 20) {
        bus.publish(Array.from({ length: 20 }, () => frame));
        await tick();
      }
      const total = events * frame.length;
      const others = readers.filter((r) => r !== stuck);
      await until(() => others.every((r) => r.bytes === total), "the 7 readers get every byte");
      await until(() => bus.subscribers === 7, "the stuck reader is disconnected");
      stuck.s.resume(); // a paused socket sees no end: reading again shows the master closed it
      await until(() => stuck.closed, "the stuck reader's socket ends");
      assert.ok(others.every((r) => !r.closed), "no reader that kept up was dropped");
      assert.deepEqual(bus.dropped, { queue_full: 1, drain_timeout: 0, backlog_bytes: 0 });
      assert.equal(bus.subscribers, 7);
      assert.equal(bus.events, events);
      for (const r of readers) r.s.destroy();
    });
  });

  test("a reader holding a few events past publish_drain_timeout is dropped at the next publish", async () => {
    let now = 1_000_000;
    await withBus({ queueSize: 500, drainTimeoutMs: 5000, backlogBytesMax: 64 * 2 ** 20 }, () => now, async (bus) => {
      const [ok, stuck] = await connect(bus, 2);
      stuck!.s.pause();
      // enough bytes to fill the kernel's buffer, far fewer events than the queue holds
      const big = packEvent("brine/test/big", { blob: "y".repeat(256 * 1024) });
      for (let i = 0; i < 16; i++) {
        bus.publish([big]);
        await tick();
      }
      assert.equal(bus.subscribers, 2, "still in time");
      await until(() => ok!.bytes === 16 * big.length, "the reader that reads has every event before the clock moves");
      now += 5001;
      bus.publish([packEvent("brine/test/after", {})]);
      await until(() => bus.subscribers === 1, "the overdue reader is disconnected");
      stuck!.s.resume();
      await until(() => stuck!.closed, "the overdue reader's socket ends");
      assert.equal(bus.dropped.drain_timeout, 1);
      assert.equal(bus.dropped.queue_full, 0);
      assert.ok(!ok!.closed);
      ok!.s.destroy();
    });
  });

  test("a reader behind by more unsent bytes than the bound is dropped, whatever its count of events", async () => {
    await withBus({ queueSize: 500, drainTimeoutMs: 5000, backlogBytesMax: 2 ** 20 }, Date.now, async (bus) => {
      const [stuck] = await connect(bus, 1);
      stuck!.s.pause();
      const big = packEvent("brine/test/big", { blob: "z".repeat(512 * 1024) });
      for (let i = 0; i < 8 && bus.subscribers === 1; i++) {
        bus.publish([big]);
        await tick();
      }
      await until(() => bus.subscribers === 0, "the reader is disconnected");
      assert.equal(bus.dropped.backlog_bytes, 1);
    });
  });
});
