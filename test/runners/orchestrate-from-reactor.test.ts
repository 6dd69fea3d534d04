/**
 * An orchestration started by the reactor (`runner.state.orchestrate` with `mods` and `pillar` as keyword
 * arguments, the usual form) when a minion sends an event: it runs as user Reactor with the event's data in its
 * pillar, its `salt/run/<jid>/ret` carries the highstate answer with `success: True`; a failing orchestration's
 * event says `success: False` (Salt's RunnerClient judges `return.data`).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import { startTestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";

async function until<T>(f: () => T | undefined, ms: number, what: string): Promise<T> {
  for (let t = 0; t < ms; t += 50) {
    const v = f();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`not seen in ${ms} ms: ${what}`);
}

test("a reaction starts an orchestration with the event's data; the return event says whether it succeeded", { timeout: 90_000 }, async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-orch-react-"));
  const srv = path.join(root, "srv", "salt");
  mkdirSync(path.join(srv, "orch"), { recursive: true });
  mkdirSync(path.join(root, "reactor"), { recursive: true });
  writeFileSync(path.join(srv, "orch", "good.sls"), "hello:\n  test.succeed_with_changes:\n    - comment: for {{ pillar.get('who', 'nobody') }}\n");
  writeFileSync(path.join(srv, "orch", "bad.sls"), "nope:\n  test.fail_without_changes\n");
  writeFileSync(path.join(root, "reactor", "orch.sls"), "start_orch:\n  runner.state.orchestrate:\n    - args:\n      - mods: orch.{{ data['data']['which'] }}\n      - pillar:\n          who: {{ data['id'] }}\n");
  const tm = await startTestMaster({ auto_accept: true, reactor: [{ "go/orch": [path.join(root, "reactor", "orch.sls")] }] } as never, root);
  const ec = new EventClient(tm.sockDir);
  await ec.connect();
  const events: BusEvent[] = [];
  ec.on((e) => events.push(e));
  const [k] = await testKeys(1);
  const m = fastMinion(tm, "asker", k!);
  try {
    await m.start();
    const runRet = (which: string) => until(() => events.find((e) => /^salt\/run\/\d+\/ret$/.test(e.tag) && e.data.fun === "runner.state.orchestrate" && e.data.fun_args?.[0]?.mods === `orch.${which}`), 30_000, `the ${which} orchestration's return`);
    await m.fireEvent("go/orch", { which: "good" });
    const good = await runRet("good");
    assert.equal(good.data.user, "Reactor");
    assert.equal(good.data.success, true);
    assert.equal(good.data.return.retcode, 0);
    const state = Object.values(good.data.return.data as Record<string, Record<string, { comment: string }>>)[0]!["test_|-hello_|-hello_|-succeed_with_changes"]!;
    assert.equal(state.comment, "for asker");
    await m.fireEvent("go/orch", { which: "bad" });
    const bad = await runRet("bad");
    assert.equal(bad.data.success, false);
    assert.equal(bad.data.return.retcode, 1);
  } finally {
    ec.close();
    await m.stop();
    await tm.stop();
  }
});
