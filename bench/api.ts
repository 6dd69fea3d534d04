/**
 * The HTTP API (src/api/) through a real master process: requests/s and the master's CPU per request
 * for `POST /login` (sharedsecret eauth: one mk_token clear request, a token written to LMDB) and for
 * `local` test.ping through `POST /` (publish with the token, the wait for every return on the API
 * thread's bus feed), against the same number of test.ping jobs through brine's own `salt` path
 * (LocalClient: publish with the root key over the request port, wait on the bus socket), alternated
 * round by round. Clients and minions run in this process, `concurrency` requests in flight; the
 * master's CPU is all its threads' (/proc/<pid>/stat), so the API figure includes the API thread.
 */
import os from "node:os";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../src/shared/config/defaults.js";
import { LocalClient } from "../src/lib/client/local-client.js";
import { keyPool } from "../src/lib/minion/keys.js";
import { TestMinion } from "../src/lib/minion/test-minion.js";
import { cpuSecondsOf } from "../tools/swarm/proc-stats.js";
import { freePort } from "../tools/free-port.js";
import { configureLogging } from "../src/shared/log.js";
import { startBrineMaster } from "./swarm.js";
import type { BenchOptions, BenchRow } from "./types.js";

const minionCount = 4;
/** requests in flight at once, for every figure */
const concurrency = 4;
const SECRET = "bench-api-shared-secret";

function processCpuUs(pid: number): number {
  return (cpuSecondsOf(`/proc/${pid}/stat`) ?? Number.NaN) * 1e6;
}

/** Run `n` calls of `one`, `concurrency` at a time; seconds of wall time and master CPU µs. */
async function timed(pid: number, n: number, one: (i: number) => Promise<void>): Promise<{ seconds: number; cpuUs: number }> {
  let next = 0;
  const cpu0 = processCpuUs(pid);
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await one(next++);
    }),
  );
  return { seconds: Number(process.hrtime.bigint() - t0) / 1e9, cpuUs: processCpuUs(pid) - cpu0 };
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  configureLogging({ level: "warning" });
  const logins = opts.full ? 2000 : 400;
  const jobs = opts.full ? 1000 : 200;
  const rounds = 2;
  const apiPort = await freePort();
  const master = await startBrineMaster({
    rest_cherrypy: { port: apiPort, host: "127.0.0.1", disable_ssl: true, login_failures_per_minute: 1000 },
    netapi_enable_clients: ["local"],
    sharedsecret: SECRET,
    external_auth: { sharedsecret: { bench: [".*"] } },
  });
  const root = path.dirname(path.dirname(master.rootKeyFile));
  const base = `http://127.0.0.1:${apiPort}`;
  const minions: TestMinion[] = [];
  try {
    for (let i = 0; ; i++) {
      const ok = await fetch(base + "/").then((r) => r.ok, () => false);
      if (ok) break;
      if (i > 300) throw new Error("the HTTP API did not come up");
      await new Promise((r) => setTimeout(r, 100));
    }
    const { keys } = await keyPool(minionCount);
    for (let i = 0; i < minionCount; i++) {
      minions.push(new TestMinion({ id: `bench-api-${i}`, master: "127.0.0.1", retPort: master.retPort, keys: keys[i]!, acceptanceWaitMs: 100, randomReauthDelayMs: 0 }));
    }
    await Promise.all(minions.map((m) => m.start()));

    const login = async () => {
      const r = await fetch(base + "/login", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ username: "bench", password: SECRET, eauth: "sharedsecret" }) });
      if (r.status !== 200) throw new Error(`login answered ${r.status}`);
      return ((await r.json()) as { return: { token: string }[] }).return[0]!.token;
    };
    const token = await login();
    const want = minions.map((m) => m.id).sort();
    const apiPing = async () => {
      const r = await fetch(base + "/", { method: "POST", headers: { "content-type": "application/json", "x-auth-token": token }, body: JSON.stringify([{ client: "local", tgt: "bench-api-*", fun: "test.ping" }]) });
      const body = (await r.json()) as { return: Record<string, unknown>[] };
      if (r.status !== 200 || Object.keys(body.return[0]!).sort().join() !== want.join()) throw new Error(`API test.ping answered ${r.status} ${JSON.stringify(body).slice(0, 200)}`);
    };
    const cfg: MasterConfig = { ...masterDefaults(), interface: "127.0.0.1", ret_port: master.retPort, sock_dir: path.join(root, "run"), cachedir: path.join(root, "cache"), user: os.userInfo().username };
    const cli = new LocalClient(cfg);
    const cliPing = async () => {
      const got: string[] = [];
      for await (const r of cli.cmdIter({ tgt: "bench-api-*", fun: "test.ping", timeoutS: 10 })) if (!("missing" in r)) got.push(r.id);
      if (got.sort().join() !== want.join()) throw new Error(`CLI test.ping got ${got.join()}`);
    };
    await apiPing();
    await cliPing();

    const sum = { login: { seconds: 0, cpuUs: 0 }, api: { seconds: 0, cpuUs: 0 }, cli: { seconds: 0, cpuUs: 0 } };
    const add = (k: keyof typeof sum, t: { seconds: number; cpuUs: number }) => {
      sum[k].seconds += t.seconds;
      sum[k].cpuUs += t.cpuUs;
    };
    for (let r = 0; r < rounds; r++) {
      add("login", await timed(master.pid, logins / rounds, async () => void (await login())));
      add("api", await timed(master.pid, jobs / rounds, apiPing));
      add("cli", await timed(master.pid, jobs / rounds, cliPing));
    }
    const note = `${minionCount} minions, ${concurrency} in flight, ${rounds} alternated rounds`;
    const apiRate = jobs / sum.api.seconds;
    const cliRate = jobs / sum.cli.seconds;
    return [
      { figure: "API POST /login", value: logins / sum.login.seconds, unit: "req/s", better: "higher", note },
      { figure: "API POST /login, master CPU", value: sum.login.cpuUs / logins, unit: "µs/req", better: "lower" },
      { figure: "API local test.ping", value: apiRate, unit: "jobs/s", better: "higher", note: `${(apiRate / cliRate).toFixed(2)} × the salt CLI path` },
      { figure: "API local test.ping, master CPU", value: sum.api.cpuUs / jobs, unit: "µs/job", better: "lower" },
      { figure: "salt CLI path (LocalClient) test.ping", value: cliRate, unit: "jobs/s", better: "higher" },
      { figure: "salt CLI path test.ping, master CPU", value: sum.cli.cpuUs / jobs, unit: "µs/job", better: "lower" },
    ];
  } finally {
    for (const m of minions) await m.stop().catch(() => undefined);
    await master.stop();
  }
}
