/**
 * Any bytes in an event's tag or data (a tag holding "\n\n", invalid UTF-8, data that is not msgpack, nesting
 * past the bus limit, a 1 MB tag with 8 MB of data) leave every reader of the bus working: `salt` waiting for
 * returns, `salt-run state.event` and an in-process event client all see the events after them. Before: Salt's
 * framing split such a tag at its first "\n\n", the rest did not decode, and the readers ended on an uncaught
 * MSGPACK_INVALID (salt exited, state.event's runner thread died, the client threw out of a socket callback).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { CLI_DIR, writeConfigDir } from "../helpers/cli.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import { packEvent } from "../../src/shared/event-frame.js";
import { encodeWire } from "../../src/shared/protocol/msgpack.js";
import type { EventBusServer } from "../../src/main-thread/bus-server.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";

/** A bus frame whose body is exactly `body` (Salt's framing: {"head": {}, "body": <bin>}). */
function rawFrame(body: Buffer): Buffer {
  return encodeWire({ head: {}, body });
}

function hostileFrames(withHuge: boolean): Buffer[] {
  let deep: unknown = 1;
  for (let i = 0; i < 300; i++) deep = [deep];
  const frames = [
    packEvent("salt/job/20260101000000000000/ret/a\n\nb", { return: "forged?" }),
    rawFrame(Buffer.concat([Buffer.from([0xff, 0xfe, 0xc1]), Buffer.from("\n\n"), encodeWire({ x: 1 })])),
    rawFrame(Buffer.concat([Buffer.from("salt/job/20260101000000000000/ret/m\n\n"), Buffer.from([0xc1, 0xc1])])),
    rawFrame(Buffer.concat([Buffer.from("deep\n\n"), encodeWire(deep)])),
    packEvent("\n\n\n\n\n\n", "\n\n"),
    rawFrame(Buffer.from("salt/job/no-separator-at-all")),
  ];
  if (withHuge) frames.push(packEvent("huge/" + "t".repeat(1_000_000), { blob: Buffer.alloc(8_000_000, 0x0a) }));
  return frames;
}

describe("any bytes on the bus leave its readers working", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let conf: string;
  let bus: EventBusServer;

  before(async () => {
    tm = await startTestMaster({ auto_accept: true });
    conf = writeConfigDir(tm);
    bus = (tm.server as unknown as { bus: EventBusServer }).bus;
  });
  after(async () => {
    await tm.stop();
  });

  /** Publish hostile frames then `marker` every 300 ms until `until` settles (at most 60 rounds). */
  async function flood(until: Promise<unknown>, marker: string): Promise<void> {
    let settled = false;
    void until.then(() => (settled = true));
    for (let i = 0; i < 60 && !settled; i++) {
      bus.publish([...hostileFrames(i < 3), packEvent(marker, { round: i })]);
      await Promise.race([until, new Promise((r) => setTimeout(r, 300))]);
    }
  }

  test("an event client skips what it cannot decode and sees the events after it", async () => {
    const c = new EventClient(tm.sockDir);
    await c.connect();
    const seen: BusEvent[] = [];
    const marker = new Promise<void>((resolve) => c.on((e) => (seen.push(e), e.tag === "brine/test/client" ? resolve() : undefined)));
    await flood(marker, "brine/test/client");
    c.close();
    const tags = seen.map((e) => e.tag);
    assert.ok(tags.includes("brine/test/client"));
    // a tag holding "\n\n" keeps its whole text when only a later separator decodes
    assert.ok(tags.includes("salt/job/20260101000000000000/ret/a\n\nb"), JSON.stringify(tags.slice(0, 5)));
    assert.ok(tags.some((t) => t.startsWith("huge/")));
    assert.ok(c.skipped >= 2, `skipped ${c.skipped}`); // data that is not msgpack, nesting past the limit
  });

  test("salt-run state.event keeps streaming past them", async () => {
    const p = spawn(process.execPath, [new URL("salt-run.js", CLI_DIR).pathname, "-c", conf, "state.event", "brine/test/*", "count=2"]);
    let out = "";
    let err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err += d));
    const closed = new Promise<number | null>((r) => p.on("close", r));
    await flood(closed, "brine/test/state-event");
    const code = await closed;
    assert.equal(code, 0, err);
    assert.equal(out.split("\n").filter((l) => l.startsWith("brine/test/state-event\t")).length, 2, out.slice(0, 500));
  });

  test("salt waiting for a return gets it and exits 0 while they pass", async () => {
    const [k] = await testKeys(1);
    const m: TestMinion = fastMinion(tm, "bus-any-bytes", k!);
    await m.start();
    try {
      const p = spawn(process.execPath, [new URL("salt.js", CLI_DIR).pathname, "-c", conf, "bus-any-bytes", "test.sleep", "2", "--out", "json", "-t", "30"]);
      let out = "";
      let err = "";
      p.stdout.on("data", (d) => (out += d));
      p.stderr.on("data", (d) => (err += d));
      const closed = new Promise<number | null>((r) => p.on("close", r));
      await flood(closed, "brine/test/salt");
      assert.equal(await closed, 0, err);
      assert.deepEqual(JSON.parse(out), { "bus-any-bytes": true });
    } finally {
      await m.stop();
    }
  });
});
