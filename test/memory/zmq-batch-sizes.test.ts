/**
 * brine_zmq_batch_bytes sets libzmq's per-connection encoder/decoder buffers (ZMQ_IN_BATCH_SIZE and
 * ZMQ_OUT_BATCH_SIZE) of the request and publish ports; read back through libzmq, so a wrong option
 * number fails here.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Publisher, Router } from "zeromq";
import { setBatchSizes } from "../../src/main-thread/zmq-memory.js";
import { masterDefaults } from "../../src/shared/config/defaults.js";

type Numbered = { getInt32Option(option: number): number };

test("both batch sizes of a ROUTER and a PUB socket read back as set, and the master's default is below libzmq's 8 KiB", () => {
  const bytes = masterDefaults().brine_zmq_batch_bytes;
  assert.ok(bytes < 8192);
  for (const s of [new Router(), new Publisher()]) {
    const n = s as unknown as Numbered;
    assert.equal(n.getInt32Option(101), 8192, "libzmq's default before");
    setBatchSizes(s, bytes);
    assert.equal(n.getInt32Option(101), bytes);
    assert.equal(n.getInt32Option(102), bytes);
    s.close();
  }
});
