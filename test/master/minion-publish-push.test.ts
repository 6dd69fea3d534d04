/**
 * `minion_publish` (the older peer publish, which waits on the master) gets its returns pushed from the event
 * bus (src/shared/job-return-watch.ts), as Salt's reads them with cmd_iter: with `job_cache: False` no return is
 * stored, and the answer still holds every targeted minion's return, as soon as the last one is in (not at the
 * timeout); a targeted minion that does not return leaves the answer to the timeout, with the others' returns.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";

describe("minion_publish with the returns pushed from the bus", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let a1: TestMinion, a2: TestMinion, a3: TestMinion;

  before(async () => {
    tm = await startTestMaster({ auto_accept: true, job_cache: false, peer: { a1: ["test.*"] } });
    const k = await testKeys(3);
    a1 = fastMinion(tm, "a1", k[0]!);
    a2 = fastMinion(tm, "a2", k[1]!);
    a3 = fastMinion(tm, "a3", k[2]!);
    await Promise.all([a1, a2, a3].map((m) => m.start()));
  });
  after(async () => {
    for (const m of [a1, a2, a3]) await m?.stop();
    await tm?.stop();
  });

  const publish = (tgt: string, tmo: number, form?: "full") =>
    a1.channel.send({ cmd: "minion_publish", fun: "test.echo", arg: ["pushed"], tgt, tgt_type: "list", ret: "", tmo, id: "a1", ...(form ? { form } : {}) }, a1.requestOptions) as Promise<Record<string, unknown>>;

  test("with job_cache off, every targeted minion's return, as soon as the last is in", async () => {
    const t0 = Date.now();
    assert.deepEqual(await publish("a2,a3", 30), { a2: "pushed", a3: "pushed" });
    assert.ok(Date.now() - t0 < 15_000, `answered before the 30 s timeout: ${Date.now() - t0} ms`);
    const full = await publish("a2", 30, "full");
    assert.match(String(full.__jid__), /^\d{20}$/);
    const a2 = full.a2 as Record<string, unknown>;
    assert.equal(a2.ret, "pushed");
    assert.equal(a2.id, "a2");
    assert.equal(a2.jid, full.__jid__);
    assert.equal(a2.fun, "test.echo");
  });

  test("a targeted minion that does not return: the others' returns at the timeout", async () => {
    await a3.stop();
    const t0 = Date.now();
    const r = await publish("a2,a3", 3);
    assert.deepEqual(r, { a2: "pushed" });
    assert.ok(Date.now() - t0 >= 2_500, `waited for the timeout: ${Date.now() - t0} ms`);
  });
});
