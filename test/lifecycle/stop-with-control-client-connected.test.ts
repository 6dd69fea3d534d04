/**
 * A master stops while a client is still connected to its control socket (a `salt-run` that connected and never
 * asked, one stopped in the middle of a call): the stop used to wait in `net.Server.close()` for that client to
 * leave, forever. Now the connection is ended and the client told so.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import path from "node:path";
import { CONTROL_SOCKET } from "../../src/shared/socket-names.js";
import { controlCall } from "../../src/lib/client/control-client.js";
import { startTestMaster } from "../helpers/master.js";

/** how long a stop may take here, ms (it takes well under a second) */
const stopWithinMs = 20_000;

test("a master stops while a control client stays connected, and the client's connection is closed", async () => {
  const tm = await startTestMaster();
  // one client connected and silent, and one that asked and got its answer (its connection already ended)
  assert.equal((await controlCall(tm.cfg.sock_dir, { op: "run", fun: "test.arg", arg: [1], kwarg: {} })).type, "return");
  const silent = net.connect(path.join(tm.cfg.sock_dir, CONTROL_SOCKET));
  await new Promise<void>((r, j) => silent.once("connect", r).once("error", j));
  const closed = new Promise<void>((r) => silent.once("close", () => r()));
  silent.on("error", () => undefined);
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([tm.stop().then(() => "stopped"), new Promise<string>((r) => (timer = setTimeout(() => r("still stopping"), stopWithinMs)))]);
  clearTimeout(timer);
  assert.equal(outcome, "stopped", `the stop waited over ${stopWithinMs / 1000} s for the silent client`);
  await closed;
  assert.ok(silent.destroyed, "the silent client's connection was closed by the master");
});
