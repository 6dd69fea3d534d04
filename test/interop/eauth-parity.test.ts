/**
 * The clear commands' answers, brine against the real Python master (3007.x from Salt's source) with the
 * same external_auth: the same requests to both, the same replies (jids and tokens compared by shape).
 * Skips when Salt's source is not configured (SALT_GIT_DIR).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { freePort, startTestMaster, type TestMaster } from "../helpers/master.js";
import { HARNESS, realSaltSkipReason, stopAtThisProcessEnd, stopRealMinions } from "../helpers/real-salt.js";

const SECRET = "parity-secret-0123456789";
const skip = realSaltSkipReason(["3007.x"]);

/** Replace what differs by nature (jids, tokens, times) with its shape. */
function shape(v: unknown): unknown {
  if (typeof v === "string") return /^\d{20}$/.test(v) ? "<jid>" : /^salt\/run\/\d{20}$/.test(v) ? "salt/run/<jid>" : v;
  if (Array.isArray(v)) return v.map(shape);
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    if (typeof o.token === "string" && typeof o.start === "number") return { token_keys: Object.keys(o).sort(), name: o.name, eauth: o.eauth };
    return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, shape(x)]));
  }
  return v;
}

describe("eauth answers match the Python master's", { skip, timeout: 300_000 }, () => {
  let dir: string;
  let tm: TestMaster;
  let pyPort: number;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "brine-pyeauth-"));
    pyPort = await freePort();
    const pubPort = await freePort();
    const extra = `sharedsecret: ${SECRET}\nexternal_auth:\n  sharedsecret:\n    ops:\n      - test.ping\n      - "@jobs"\n`;
    stopAtThisProcessEnd(dir);
    const r = spawnSync(path.join(HARNESS, "start-master.sh"), ["--dir", dir, String(pubPort), String(pyPort)], {
      env: { ...process.env, SALT_REF: "3007.x", SALT_MASTER_EXTRA: extra, SALT_LOG_LEVEL: "info" },
      encoding: "utf8",
      timeout: 120_000,
    });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    tm = await startTestMaster({ sharedsecret: SECRET, external_auth: { sharedsecret: { ops: ["test.ping", "@jobs"] } } });
  });
  after(async () => {
    stopRealMinions(dir);
    rmSync(dir, { recursive: true, force: true });
    await tm?.stop();
  });

  async function probe(port: number, key: string): Promise<Record<string, unknown>> {
    const raw = new RawClient({ host: "127.0.0.1", port, timeoutMs: 15_000 });
    const out: Record<string, unknown> = {};
    const cr = (u: string, p: string) => ({ eauth: "sharedsecret", username: u, password: p });
    const pub = (kwargs: Record<string, unknown>, over: Record<string, unknown> = {}) =>
      raw.clear({ cmd: "publish", tgt: "*", fun: "cmd.run", arg: ["id"], tgt_type: "glob", ret: "", jid: "", user: "root", key, kwargs, ...over });
    try {
      out["publish, root key + wrong password"] = await pub(cr("nobody", "x"));
      out["publish, a function outside the list"] = await pub(cr("ops", SECRET));
      out["publish, unknown token"] = await pub({ token: "0".repeat(64) });
      out["publish, backend not enabled"] = await pub({ eauth: "pam", username: "ops", password: "x" });
      out["publish, allowed, no minion"] = await pub(cr("ops", SECRET), { fun: "test.ping", arg: [] });
      out["runner, wrong password"] = await raw.clear({ cmd: "runner", fun: "jobs.list_jobs", kwarg: {}, ...cr("ops", "x") });
      out["runner, not in the list"] = await raw.clear({ cmd: "runner", fun: "manage.up", kwarg: {}, ...cr("ops", SECRET) });
      out["runner, no module"] = await raw.clear({ cmd: "runner", fun: "nodot", kwarg: {}, ...cr("ops", SECRET) });
      out["runner, no credentials"] = await raw.clear({ cmd: "runner", fun: "manage.up", kwarg: {} });
      out["wheel, unknown token"] = await raw.clear({ cmd: "wheel", fun: "key.list_all", token: "f".repeat(64) });
      out["wheel, not in the list"] = await raw.clear({ cmd: "wheel", fun: "key.list_all", ...cr("ops", SECRET) });
      out["mk_token, wrong password"] = await raw.clear({ cmd: "mk_token", ...cr("ops", "x") });
      const tok = (await raw.clear({ cmd: "mk_token", ...cr("ops", SECRET) })) as Record<string, unknown>;
      out["mk_token"] = tok;
      out["get_token, no token"] = await raw.clear({ cmd: "get_token" });
      out["get_token, unknown"] = await raw.clear({ cmd: "get_token", token: "a".repeat(64) });
      out["get_token"] = await raw.clear({ cmd: "get_token", token: tok.token });
      out["runner with the token"] = await raw.clear({ cmd: "runner", fun: "jobs.list_jobs", kwarg: {}, token: tok.token });
      out["a method Salt does not expose"] = await raw.clear({ cmd: "_prep_jid" });
    } finally {
      raw.close();
    }
    return out;
  }

  test("every clear command gets the same answer from both masters", async () => {
    const py = shape(await probe(pyPort, readFileSync(path.join(dir, "master", "cache", ".root_key"), "utf8").trim())) as Record<string, unknown>;
    const br = shape(await probe(tm.retPort, tm.rootKey)) as Record<string, unknown>;
    for (const k of Object.keys(py)) assert.deepEqual(br[k], py[k], k);
  });
});
