/**
 * A runner thread may ask the master to fire one event only: `salt/run/<its own jid>/args` (orchestration's
 * progress, Salt's fire_args). A runner posting any other tag, or another job's args tag, straight to the main
 * thread (a custom runner can reach `parentPort`) fires nothing.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventClient } from "../../src/lib/client/event-client.js";
import { controlCall } from "../../src/lib/client/control-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import { startTestMaster } from "../helpers/master.js";
import { writeFiles } from "./helpers.js";

test("a runner fires its own salt/run/<jid>/args and nothing else", { timeout: 60_000 }, async () => {
  const tm = await startTestMaster();
  const ec = new EventClient(tm.sockDir);
  await ec.connect();
  const events: BusEvent[] = [];
  ec.on((e) => events.push(e));
  try {
    writeFiles(tm.cfg.file_roots.base![0]!, {
      "_runners/forge.mjs": `import { parentPort } from "node:worker_threads";
export async function go(ctx) {
  parentPort.postMessage({ k: "fire", tag: "salt/key", data: { act: "delete", id: "victim" } });
  parentPort.postMessage({ k: "fire", tag: "salt/run/20000101000000000000/args", data: { type: "runner" } });
  ctx.fireArgs({ type: "runner", name: "mine" });
  return ctx.jid;
}
`,
    });
    assert.equal((await controlCall(tm.sockDir, { op: "run", fun: "saltutil.sync_runners", arg: [], kwarg: {} })).type, "return");
    const r = await controlCall(tm.sockDir, { op: "run", fun: "forge.go", arg: [], kwarg: {} });
    assert.equal(r.type, "return", r.message);
    const jid = String(r.ret);
    await new Promise((res) => setTimeout(res, 300));
    assert.deepEqual(events.filter((e) => e.tag === `salt/run/${jid}/args`).map((e) => ({ type: e.data.type, name: e.data.name })), [{ type: "runner", name: "mine" }]);
    assert.ok(!events.some((e) => e.tag === "salt/key" || e.tag === "salt/run/20000101000000000000/args"));
  } finally {
    ec.close();
    await tm.stop();
  }
});
