/**
 * A `salt` CLI the event bus drops in a flood (a reader `pub_server_write_queue_size` events behind is disconnected,
 * as Salt's later event publisher does) still prints every minion's return: it reconnects to the bus, and reads
 * the returns that went by meanwhile from the master's job cache (jobs.list_job), instead of reporting minions
 * that returned as "Minion did not return".
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys, waitForEvent } from "../helpers/minions.js";
import { CLI_DIR, jsonDocs, writeConfigDir } from "../helpers/cli.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";

const MINIONS = 6;
/** the bus's bound on one reader, events; the flood is many times that, in events big enough to fill the socket */
const QUEUE = 20;
const FLOOD_EVENTS = 400;
const FLOOD_EVENT_BYTES = 16 * 1024;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let tm: TestMaster | undefined;
const minions: TestMinion[] = [];
after(async () => {
  for (const m of minions) await m.stop().catch(() => undefined);
  await tm?.stop().catch(() => undefined);
});

test("a salt CLI cut off from the event bus while its minions return still prints every return", { timeout: 120_000 }, async () => {
  tm = await startTestMaster({ auto_accept: true, worker_threads: 2, pub_server_write_queue_size: QUEUE, publish_drain_timeout: 0.5 });
  const keys = await testKeys(MINIONS);
  for (let i = 0; i < MINIONS; i++) minions.push(fastMinion(tm, `drop-${i}`, keys[i]!));
  await Promise.all(minions.map((m) => m.start()));
  for (const m of minions) m.holdReturns = true;

  const bus = new EventClient(tm.sockDir);
  await bus.connect();
  let jid: string | undefined;
  const returned = new Set<string>();
  bus.on((e) => {
    const m = /^salt\/job\/(\d+)\/(new|ret\/(.+))$/.exec(e.tag);
    if (m?.[2] === "new" && !jid) jid = m[1];
    else if (m?.[3] && m[1] === jid) returned.add(m[3]);
  });

  const conf = writeConfigDir(tm);
  const cli = spawn(process.execPath, [new URL("salt.js", CLI_DIR).pathname, "-c", conf, "drop-*", "test.ping", "--out", "json", "-t", "20", "--gather-job-timeout", "3"], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  cli.stdout.on("data", (d) => (stdout += d));
  cli.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => cli.on("close", (code) => r(code)));
  try {
    // every minion has the job (and holds its return); then the CLI stops reading
    await Promise.all(minions.map((m) => waitForEvent(m, "publish", () => true, 30_000)));
    assert.ok(jid, "the job was published");
    cli.kill("SIGSTOP");
    // a flood the stopped CLI cannot read: the bus drops it (one event a turn, so this process's own reader keeps up)
    const blob = "x".repeat(FLOOD_EVENT_BYTES);
    for (let i = 0; i < FLOOD_EVENTS; i++) {
      tm.server.fire("brine/test/flood", { i, blob });
      await new Promise((r) => setImmediate(r));
    }
    await sleep(1_500);
    // the returns go by while the CLI is cut off
    await Promise.all(minions.map((m) => m.sendHeldReturns()));
    for (const end = Date.now() + 30_000; returned.size < MINIONS && Date.now() < end; ) await sleep(50);
    assert.equal(returned.size, MINIONS, "every minion returned (seen on the bus by a reader that keeps up)");
    cli.kill("SIGCONT");
    const code = await exited;
    assert.match(stderr, /event bus dropped this client/, `the CLI was dropped and said so: ${stderr}`);
    const docs = jsonDocs(stdout);
    for (const m of minions) assert.equal(docs[m.id], true, `${m.id}'s return is printed: ${stdout}`);
    assert.doesNotMatch(stdout, /did not return/);
    assert.equal(code, 0, stderr);
  } finally {
    cli.kill("SIGCONT");
    cli.kill("SIGKILL");
    bus.close();
  }
});
