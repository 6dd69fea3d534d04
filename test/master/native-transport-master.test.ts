/**
 * A master with `brine_minion_transport: native` named explicitly (the default; the real-minion case is
 * test/interop/real-minion-transports, libzmq's test/master/libzmq-transport-master):
 * minions sign in and answer a job through the salt CLI, a peer that is not ZMTP is closed while they keep being
 * served, a request over frameBytesMax is answered "bad load" as a request worker answers it, and libzmq's
 * `brine_zmq_batch_bytes`, set, is warned about as not implemented with this transport.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startTestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";
import { frameBytesMax } from "../../src/shared/protocol/limits.js";

test("native transport: minions answer a job; a non-ZMTP peer is closed; a request over frameBytesMax gets 'bad load'; brine_zmq_batch_bytes is said to be ignored", { timeout: 180_000 }, async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-native-"));
  const logFile = path.join(root, "master.log");
  const tm = await startTestMaster({ auto_accept: true, brine_minion_transport: "native", brine_zmq_batch_bytes: 4096 }, undefined, { logFile });
  assert.equal(tm.cfg.brine_minion_transport, "native");
  const keys = await testKeys(2);
  const minions = [fastMinion(tm, "nat-a", keys[0]!), fastMinion(tm, "nat-b", keys[1]!, { protocol: "v2" })];
  const raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 60_000 });
  try {
    await Promise.all(minions.map((m) => m.start()));
    const conf = writeConfigDir(tm);
    const r = await runCli("salt", ["-c", conf, "nat-*", "test.ping", "--out", "json", "-t", "15"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /"nat-a": true/);
    assert.match(r.stdout, /"nat-b": true/);

    // an HTTP client on the request port: closed, logged
    const closed = await new Promise<boolean>((resolve) => {
      const s = net.connect(tm.retPort, "127.0.0.1", () => s.write("GET / HTTP/1.1\r\n\r\n"));
      s.on("data", () => {});
      s.on("error", () => {});
      s.on("close", () => resolve(true));
      setTimeout(() => resolve(false), 10_000);
    });
    assert.ok(closed, "the non-ZMTP peer was closed");

    assert.deepEqual(decodeWire(await raw.request(Buffer.alloc(frameBytesMax + 1, 0x90))), { msg: "bad load" });
    const again = await runCli("salt", ["-c", conf, "nat-*", "test.ping", "--out", "json", "-t", "15"]);
    assert.match(again.stdout, /"nat-a": true/);
    assert.match(again.stdout, /"nat-b": true/);
    const log = readFileSync(logFile, "utf8");
    assert.match(log, /ROUTER port: closed the connection from 127\.0\.0\.1:\d+: not a ZMTP peer/);
    assert.match(log, /bad load received on socket: frame of 67108865 bytes exceeds frameBytesMax/);
    assert.match(log, /brine_zmq_batch_bytes \(4096\) is not implemented with brine_minion_transport: native/, "libzmq's option is said to be ignored");
  } finally {
    raw.close();
    await Promise.all(minions.map((m) => m.stop()));
    await tm.stop();
    rmSync(root, { recursive: true, force: true });
  }
});
