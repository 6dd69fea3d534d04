/**
 * `_auth` through real sockets in every key state, with the `salt/auth` events a master fires:
 * pending → accepted by salt-key, rejected, denied on a changed key, autosign_file, autoreject_file,
 * max_minions "full", open_mode.
 */
import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { isBrineError } from "../../src/shared/errors.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

async function withMaster(overrides: Record<string, unknown>, fn: (tm: TestMaster, events: BusEvent[]) => Promise<void>): Promise<void> {
  const tm = await startTestMaster(overrides);
  const ec = new EventClient(tm.sockDir);
  await ec.connect();
  const events: BusEvent[] = [];
  ec.on((e) => events.push(e));
  try {
    await fn(tm, events);
  } finally {
    ec.close();
    await tm.stop();
  }
}

const authActs = (events: BusEvent[], id: string) => events.filter((e) => e.tag === "salt/auth" && e.data.id === id).map((e) => e.data.act);

describe("auth in every key state", { timeout: 300_000 }, () => {
  let k: MinionKeys[];
  before(async () => {
    k = await testKeys(4);
  });

  test("pending until salt-key -a, then accepted; events pend then accept", async () => {
    await withMaster({}, async (tm, events) => {
      const m = fastMinion(tm, "st-pend", k[0]!, { authDeadlineMs: 500 });
      try {
        await assert.rejects(m.start(), (e) => isBrineError(e, "MINION_AUTH_PENDING"));
        assert.ok(existsSync(path.join(tm.pkiDir, "minions_pre", "st-pend")));
        const conf = writeConfigDir(tm);
        const list = await runCli("salt-key", ["-c", conf, "-l", "un"]);
        assert.match(list.stdout, /Unaccepted Keys:\nst-pend/);
        const acc = await runCli("salt-key", ["-c", conf, "-a", "st-pend", "-y"]);
        assert.equal(acc.code, 0, acc.stderr);
        assert.ok(existsSync(path.join(tm.pkiDir, "minions", "st-pend")));
        await m.start();
        assert.ok(m.running);
        assert.deepEqual([...new Set(authActs(events, "st-pend"))], ["pend", "accept"]);
        assert.ok(events.some((e) => e.tag === "salt/key" && e.data.act === "accept" && e.data.id === "st-pend"), "salt-key told the running master");
      } finally {
        await m.stop();
      }
    });
  });

  test("a rejected key is refused and stays rejected", async () => {
    await withMaster({ auto_accept: true }, async (tm, events) => {
      mkdirSync(path.join(tm.pkiDir, "minions_rejected"), { recursive: true });
      writeFileSync(path.join(tm.pkiDir, "minions_rejected", "st-rej"), k[1]!.pub);
      const m = fastMinion(tm, "st-rej", k[1]!);
      await assert.rejects(m.start(), (e) => isBrineError(e, "MINION_AUTH_REJECTED"));
      await m.stop();
      assert.ok(!existsSync(path.join(tm.pkiDir, "minions", "st-rej")));
      assert.ok(events.some((e) => e.tag === "salt/auth" && e.data.id === "st-rej" && e.data.result === false));
    });
  });

  test("an accepted id signing in with another key is denied; the new key lands in minions_denied", async () => {
    await withMaster({ auto_accept: true }, async (tm, events) => {
      mkdirSync(path.join(tm.pkiDir, "minions"), { recursive: true });
      writeFileSync(path.join(tm.pkiDir, "minions", "st-den"), k[2]!.pub);
      const m = fastMinion(tm, "st-den", k[3]!);
      await assert.rejects(m.start(), (e) => isBrineError(e, "MINION_AUTH_REJECTED"));
      await m.stop();
      assert.equal(readFileSync(path.join(tm.pkiDir, "minions", "st-den"), "utf8"), k[2]!.pub, "the accepted key is untouched");
      assert.ok(existsSync(path.join(tm.pkiDir, "minions_denied", "st-den")));
      assert.ok(authActs(events, "st-den").includes("denied"));
    });
  });

  test("autosign_file (glob and regex lines) accepts; autoreject_file rejects", async () => {
    await withMaster({}, async (tm) => {
      const sign = path.join(tm.root, "autosign.conf");
      const reject = path.join(tm.root, "autoreject.conf");
      writeFileSync(sign, "# comment\nweb-*\ndb[0-9]+\n", { mode: 0o644 });
      writeFileSync(reject, "bad-*\n", { mode: 0o644 });
      tm.cfg.autosign_file = sign;
      tm.cfg.autoreject_file = reject;
      await tm.stop(true);
      const tm2 = await startTestMaster({ autosign_file: sign, autoreject_file: reject }, tm.root);
      try {
        const a = fastMinion(tm2, "web-1", k[0]!);
        const b = fastMinion(tm2, "db42", k[1]!);
        const c = fastMinion(tm2, "bad-1", k[2]!);
        await a.start();
        await b.start();
        await assert.rejects(c.start(), (e) => isBrineError(e, "MINION_AUTH_REJECTED"));
        for (const m of [a, b, c]) await m.stop();
        assert.ok(existsSync(path.join(tm2.pkiDir, "minions", "web-1")));
        assert.ok(existsSync(path.join(tm2.pkiDir, "minions", "db42")));
        assert.ok(existsSync(path.join(tm2.pkiDir, "minions_rejected", "bad-1")));
      } finally {
        await tm2.stop();
      }
    });
  });

  test("max_minions: the next new minion is refused as full; known ones still sign in", async () => {
    await withMaster({ auto_accept: true, max_minions: 1 }, async (tm, events) => {
      const a = fastMinion(tm, "st-max-a", k[0]!);
      const b = fastMinion(tm, "st-max-b", k[1]!);
      try {
        await a.start();
        await assert.rejects(b.start(), (e) => isBrineError(e, "MINION_AUTH_FULL"));
        assert.ok(authActs(events, "st-max-b").includes("full"));
        await a.stop();
        await a.start();
        assert.ok(a.running);
      } finally {
        await a.stop();
        await b.stop();
      }
    });
  });

  test("open_mode accepts a changed key and overwrites it", async () => {
    await withMaster({ open_mode: true }, async (tm) => {
      mkdirSync(path.join(tm.pkiDir, "minions"), { recursive: true });
      writeFileSync(path.join(tm.pkiDir, "minions", "st-open"), k[2]!.pub);
      const m = fastMinion(tm, "st-open", k[3]!);
      try {
        await m.start();
        assert.equal(readFileSync(path.join(tm.pkiDir, "minions", "st-open"), "utf8"), k[3]!.pub);
      } finally {
        await m.stop();
      }
    });
  });
});
