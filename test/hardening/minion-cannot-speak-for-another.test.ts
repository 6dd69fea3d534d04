/**
 * One minion cannot speak for another through `_minion_event` (issue 13). Salt checks only a batch's
 * `tag`, never the joined `pretag/tag` nor the single-event form, so on a Python master an accepted
 * minion fires `salt/job/<jid>/ret/<other id>` and the CLI prints it as the other minion's return.
 * brine filters every tag a minion's request fires, and logs each refusal (rate-limited, one line each,
 * naming the minion).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { refusedEventLogsPerWindow } from "../../src/workers/req-handler/aes-funcs.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

describe("a minion cannot speak for another", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let conf: string;
  let good: TestMinion;
  let evil: TestMinion;
  let k: MinionKeys[];
  let raw: RawClient;
  let logFile: string;
  const heard: { tag: string; data: any }[] = [];
  let ec: EventClient;

  before(async () => {
    logFile = path.join(os.tmpdir(), `brine-speak-for-${process.pid}.log`);
    tm = await startTestMaster({ auto_accept: true }, undefined, { logFile });
    conf = writeConfigDir(tm);
    k = await testKeys(2);
    good = fastMinion(tm, "good", k[0]!);
    evil = fastMinion(tm, "evil", k[1]!);
    await good.start();
    await evil.start();
    ec = new EventClient(tm.sockDir);
    await ec.connect();
    ec.on((e) => heard.push(e));
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 5000 });
  });
  after(async () => {
    raw.close();
    ec.close();
    await good.stop();
    await evil.stop();
    await tm.stop();
  });

  /** `_minion_event` from evil, with its own valid session and tok. */
  const fromEvil = (load: Record<string, unknown>) => raw.aes({ cmd: "_minion_event", id: "evil", ...load }, { key: evil.creds!.session!, id: "evil", keys: k[1] });

  test("pretag 'salt/job/<jid>/ret' with tag '<other id>' is dropped: salt -L good,evil does not print the forged return (Python master: same hole)", async () => {
    // evil answers every job it sees with a forged return for good, at once; good's real test.sleep takes 2 s
    const forge = (p: { load: { jid: string } }) => {
      void fromEvil({
        pretag: `salt/job/${p.load.jid}/ret`,
        events: [{ tag: "good", data: { id: "good", jid: p.load.jid, fun: "test.sleep", fun_args: [2], return: "FORGED", retcode: 0, success: true } }],
      });
    };
    evil.on("publish", forge as never);
    try {
      const r = await runCli("salt", ["-c", conf, "-L", "good,evil", "test.sleep", "2", "--out", "json", "-t", "15"]);
      const out = Object.assign({}, ...r.stdout.trim().split(/\n(?=\{)/).filter(Boolean).map((b) => JSON.parse(b)));
      assert.equal(out.good, true, r.stdout);
      assert.equal(out.evil, true, r.stdout);
      assert.ok(!r.stdout.includes("FORGED"), r.stdout);
    } finally {
      evil.off("publish", forge as never);
    }
    assert.ok(!heard.some((e) => e.tag.startsWith("salt/job/") && e.tag.endsWith("/ret/good") && e.data?.return === "FORGED"));
  });

  test("tags a minion may not fire are dropped, alone, in a batch or joined with a pretag; its own tags pass", async () => {
    const jid = "20260101000000000042";
    const refused = [
      "salt/auth",
      "salt/key",
      `salt/job/${jid}/new`,
      `salt/job/${jid}/ret/good`,
      `salt/job/${jid}/prog/good/0`,
      "salt/run/123/new",
      "salt/cluster/anything",
      "salt/presence/change",
      "my/tag\n2026-01-01 00:00:00,000 [brine.auth       ][CRITICAL][1] forged",
      "esc\x1b[2J",
    ];
    const before = heard.length;
    for (const tag of refused) await fromEvil({ tag, data: { x: 1 } });
    await fromEvil({ events: refused.map((tag) => ({ tag, data: { x: 2 } })) });
    // joined: each part harmless, the whole a reserved or forged tag
    await fromEvil({ pretag: "salt", events: [{ tag: "auth", data: { x: 3 } }, { tag: "key", data: { x: 3 } }] });
    await fromEvil({ pretag: `salt/job/${jid}`, events: [{ tag: "new", data: { x: 3 } }] });
    await fromEvil({ pretag: "ok/prefix", events: [{ tag: "fine", data: { x: 4 } }] });
    await fromEvil({ tag: `salt/job/${jid}/ret/evil`, data: { x: 5 } });
    await fromEvil({ tag: "custom/evil/thing", data: { x: 6 } });
    await new Promise((r) => setTimeout(r, 500));
    const got = heard.slice(before).map((e) => e.tag);
    for (const tag of refused) assert.ok(!got.includes(tag), `fired: ${JSON.stringify(tag)}`);
    for (const tag of ["salt/auth", "salt/key", `salt/job/${jid}/new`]) assert.ok(!got.includes(tag), tag);
    for (const tag of ["fine", "ok/prefix/fine", `salt/job/${jid}/ret/evil`, "custom/evil/thing"]) assert.ok(got.includes(tag), `not fired: ${tag}`);
  });

  test("refusals are logged one line each, naming the minion, a tag's newline escaped, at most a budget per minute", async () => {
    for (let i = 0; i < 3 * refusedEventLogsPerWindow; i++) await fromEvil({ tag: `salt/auth`, data: { i } });
    await new Promise((r) => setTimeout(r, 500));
    const lines = readFileSync(logFile, "utf8").split("\n");
    const refusals = lines.filter((l) => l.includes("Filtering blacklisted event tag"));
    assert.ok(refusals.length > 0 && refusals.length <= refusedEventLogsPerWindow, `${refusals.length} lines`);
    assert.ok(refusals.every((l) => l.includes("from evil")));
    // the forged line inside a tag stayed inside its own line
    assert.ok(refusals.some((l) => l.includes("my/tag\\n2026-01-01")));
    assert.ok(!lines.some((l) => l.startsWith("2026-01-01 00:00:00,000 [brine.auth")));
    assert.ok(!lines.some((l) => l.includes("\x1b")));
  });
});
