/**
 * The event bus's per-reader bound (src/main-thread/bus-backlog.ts), table-tested with byte counts and a clock:
 * what the kernel took is forgotten, more than pub_server_write_queue_size waiting events drop the reader, an
 * event older than publish_drain_timeout drops it, and so do too many unsent bytes.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { SubscriberBacklog, type BusDropReason } from "../../src/main-thread/bus-backlog.js";

const limits = { queueSize: 3, drainTimeoutMs: 5000, backlogBytesMax: 1000 };

type Step = { wrote: number[]; unsent: number; at: number } | { check: true; unsent: number; at: number };
const cases: { name: string; steps: Step[]; verdicts: (BusDropReason | undefined)[]; waiting: number }[] = [
  {
    name: "a reader that keeps up: the kernel took every byte, nothing is remembered",
    steps: [{ wrote: [100, 100], unsent: 0, at: 0 }, { wrote: [100, 100, 100, 100, 100], unsent: 0, at: 10_000 }],
    verdicts: [undefined, undefined],
    waiting: 0,
  },
  {
    name: "a partly sent batch: only the events whose last byte is unsent wait",
    steps: [{ wrote: [100, 100, 100], unsent: 150, at: 0 }],
    verdicts: [undefined],
    waiting: 2,
  },
  {
    name: "exactly pub_server_write_queue_size waiting events are kept",
    steps: [{ wrote: [10, 10, 10], unsent: 30, at: 0 }],
    verdicts: [undefined],
    waiting: 3,
  },
  {
    name: "one more waiting event than pub_server_write_queue_size drops the reader",
    steps: [{ wrote: [10, 10, 10], unsent: 30, at: 0 }, { wrote: [10], unsent: 40, at: 1 }],
    verdicts: [undefined, "queue_full"],
    waiting: 3,
  },
  {
    name: "the kernel taking bytes frees room in the queue",
    steps: [{ wrote: [10, 10, 10], unsent: 30, at: 0 }, { wrote: [10], unsent: 15, at: 1 }],
    verdicts: [undefined, undefined],
    waiting: 2,
  },
  {
    name: "an event waiting past publish_drain_timeout drops the reader at the next write",
    steps: [{ wrote: [10], unsent: 10, at: 0 }, { wrote: [10], unsent: 20, at: 5001 }],
    verdicts: [undefined, "drain_timeout"],
    waiting: 2,
  },
  {
    name: "an event waiting exactly publish_drain_timeout is still in time",
    steps: [{ wrote: [10], unsent: 10, at: 0 }, { check: true, unsent: 10, at: 5000 }],
    verdicts: [undefined, undefined],
    waiting: 1,
  },
  {
    name: "the clock is read from the oldest waiting event: a sent old one no longer counts",
    steps: [{ wrote: [10], unsent: 10, at: 0 }, { wrote: [10], unsent: 10, at: 4000 }, { check: true, unsent: 10, at: 8000 }],
    verdicts: [undefined, undefined, undefined],
    waiting: 1,
  },
  {
    name: "one event bigger than the byte bound drops the reader whatever the count",
    steps: [{ wrote: [5000], unsent: 4000, at: 0 }],
    verdicts: ["backlog_bytes"],
    waiting: 0,
  },
];

describe("an event-bus reader's backlog", () => {
  for (const c of cases) {
    test(c.name, () => {
      const b = new SubscriberBacklog(limits);
      const got = c.steps.map((s) => ("check" in s ? b.check(s.unsent, s.at) : b.wrote(s.wrote, s.unsent, s.at)));
      assert.deepEqual(got, c.verdicts);
      assert.equal(b.waiting, c.waiting);
    });
  }

  test("the ring wraps: a long-lived reader that falls behind now and then is judged on its waiting events only", () => {
    const b = new SubscriberBacklog(limits);
    for (let i = 0; i < 1000; i++) {
      // the kernel is always one or two events behind
      assert.equal(b.wrote([10, 10, 10], 10 + (i % 2) * 10, i), undefined, `round ${i}`);
      assert.equal(b.waiting, 1 + (i % 2));
    }
  });
});
