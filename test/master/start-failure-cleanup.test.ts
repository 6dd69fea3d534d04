/**
 * A master whose start fails part way (here: its request port is taken, after the publish socket, the event
 * bus and the request threads are up) stops what it started before the error goes on: the publish port is
 * free again at once, and no request thread keeps the process alive.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { freePort, startTestMaster } from "../helpers/master.js";

function listen(port: number): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(port, "127.0.0.1", () => resolve(s));
  });
}

test("a master that cannot bind its request port fails to start and releases everything it had started", async () => {
  const retPort = await freePort();
  const publishPort = await freePort();
  const squatter = await listen(retPort);
  try {
    await assert.rejects(startTestMaster({ ret_port: retPort, publish_port: publishPort }), /in use|EADDRINUSE/i);
  } finally {
    await new Promise((r) => squatter.close(r));
  }
  // the failed master's publish socket is closed: another master binds the same port
  const m = await startTestMaster({ ret_port: retPort, publish_port: publishPort });
  assert.equal(m.publishPort, publishPort);
  await m.stop();
});
