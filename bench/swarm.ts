/**
 * The swarm benchmark: a brine master started as its own process (auto_accept, loopback, fresh keys and
 * cache), then brine-swarm's `ping` scenario against it — 1,000 minions by default, 5,000 with `--full` —
 * with the minions spread over forked worker processes and the master's RSS/CPU read from /proc.
 * The key pool lives in var/swarm-keys (generated once; the first run pays for it).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runSwarm } from "../tools/swarm/swarm.js";
import type { SwarmReport } from "../tools/swarm/report.js";
import type { BenchOptions, BenchRow } from "./types.js";
import { freePort } from "../tools/free-port.js";
import type { MinionSettings } from "../tools/swarm/events.js";
import { DEFAULT_KEY_POOL_DIR } from "../src/lib/minion/keys.js";
import { masterDefaults } from "../src/shared/config/defaults.js";

/**
 * Keys in the pool the benches' fleets share (minion i uses slot i % poolKeySlots): RSA-2048 generation costs
 * 0.1-0.7 s a key, so a fresh 2,000-key pool on a loaded 2-core box takes most of an hour; several ids on one key
 * are accepted as Salt accepts them, and cost the master the same per sign-in.
 */
export const poolKeySlots = 100;

/** v3 minions on the pooled keys for a bench's Fleet: Salt's timeouts, 1 s acceptance wait, sign-ins may take `signInTimeoutMs`. */
export function poolMinionSettings(retPort: number, idPrefix: string, count: number, signInTimeoutMs: number): MinionSettings {
  return {
    master: "127.0.0.1",
    retPort,
    protocol: "v3",
    keyDir: DEFAULT_KEY_POOL_DIR,
    keySlots: poolKeySlots,
    idPrefix,
    idWidth: Math.max(5, String(count - 1).length),
    acceptanceWaitMs: 10_000, // Salt's acceptance_wait_time: a failed sign-in is retried as real minions retry it
    acceptanceWaitMaxMs: 0,
    authDeadlineMs: signInTimeoutMs,
    authTimeoutMs: 5_000,
    authTries: 7,
    requestTimeoutMs: 60_000,
    requestTries: 3,
    randomReauthDelayMs: 0,
    reconDefaultMs: 1_000,
    reconMaxMs: 10_000,
    pubMonitor: false,
    sourceIps: 0,
  };
}


function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(port, "127.0.0.1");
    c.once("connect", () => (c.destroy(), resolve(true)));
    c.once("error", () => resolve(false));
  });
}

export interface BenchMaster {
  pid: number;
  retPort: number;
  publishPort: number;
  rootKeyFile: string;
  /** the config directory (`-c`), the bus socket's directory and the pki directory */
  configDir: string;
  sockDir: string;
  pkiDir: string;
  stop(): Promise<void>;
}

/**
 * The brine master's minion-facing transport in the benches (`brine_minion_transport`): BRINE_BENCH_MINION_TRANSPORT,
 * `native` or `libzmq` (the master's default when unset); fleet-memory and publish-fanout take a comma-separated
 * list and run each.
 */
export function benchTransports(): ("libzmq" | "native")[] {
  const ts = (process.env.BRINE_BENCH_MINION_TRANSPORT ?? masterDefaults().brine_minion_transport).split(",").map((t) => t.trim());
  for (const t of ts) if (t !== "libzmq" && t !== "native") throw new Error(`BRINE_BENCH_MINION_TRANSPORT: libzmq or native, not ${JSON.stringify(t)}`);
  return ts as ("libzmq" | "native")[];
}

/** Start `salt-master -c DIR` (brine) on free loopback ports; resolves when it answers. */
export async function startBrineMaster(extraConfig: Record<string, unknown> = {}, opts: { cpus?: string; seed?: (pkiDir: string) => void } = {}): Promise<BenchMaster> {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-bench-master-"));
  // opts.seed: files the master finds in its pki directory when it starts (accepted keys, say)
  if (opts.seed) {
    mkdirSync(path.join(root, "pki", "master"), { recursive: true });
    opts.seed(path.join(root, "pki", "master"));
  }
  const etc = path.join(root, "etc", "salt");
  mkdirSync(etc, { recursive: true });
  mkdirSync(path.join(root, "srv", "salt"), { recursive: true });
  mkdirSync(path.join(root, "srv", "pillar"), { recursive: true });
  const retPort = await freePort();
  const publishPort = await freePort();
  const cfg: Record<string, unknown> = {
    root_dir: root,
    interface: "127.0.0.1",
    ret_port: retPort,
    publish_port: publishPort,
    pki_dir: "/pki/master",
    cachedir: "/cache",
    sock_dir: "/run",
    log_file: "/log/master",
    log_level: "warning",
    auto_accept: true,
    user: os.userInfo().username,
    file_roots: { base: [path.join(root, "srv", "salt")] },
    pillar_roots: { base: [path.join(root, "srv", "pillar")] },
    brine_minion_transport: benchTransports()[0],
    ...extraConfig,
    // BRINE_BENCH_MASTER_CONFIG: options (JSON) every bench master gets, e.g. '{"worker_threads":3}' for an arm of a pair that differs by an option
    ...(process.env.BRINE_BENCH_MASTER_CONFIG ? (JSON.parse(process.env.BRINE_BENCH_MASTER_CONFIG) as Record<string, unknown>) : {}),
  };
  writeFileSync(path.join(etc, "master"), Object.entries(cfg).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join("\n") + "\n");
  // BRINE_BENCH_MASTER_DIST: another build's dist/ directory, so one bench and one swarm measure two builds' masters
  const dist = process.env.BRINE_BENCH_MASTER_DIST;
  const cli = dist ? path.resolve(dist, "src/cli/salt-master.js") : fileURLToPath(new URL("../src/cli/salt-master.js", import.meta.url));
  if (dist && !existsSync(cli)) throw new Error(`BRINE_BENCH_MASTER_DIST: no ${cli}`);
  // BRINE_BENCH_MASTER_NODE_ARGS: node options for the master process (e.g. "--cpu-prof --cpu-prof-dir=DIR" to profile it)
  const nodeArgs = (process.env.BRINE_BENCH_MASTER_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const argv = [...nodeArgs, cli, "-c", etc, "-l", "warning"];
  // BRINE_BENCH_MASTER_GLIBC_TUNABLES: the master's (only its) GLIBC_TUNABLES, e.g. fixed malloc trim and mmap thresholds
  const tunables = process.env.BRINE_BENCH_MASTER_GLIBC_TUNABLES;
  const env = tunables ? { ...process.env, GLIBC_TUNABLES: tunables } : process.env;
  // opts.cpus: run it on these CPUs only (taskset execs node, so the pid is the master's)
  const child: ChildProcess = opts.cpus ? spawn("taskset", ["-c", opts.cpus, process.execPath, ...argv], { stdio: ["ignore", "ignore", "inherit"], env }) : spawn(process.execPath, argv, { stdio: ["ignore", "ignore", "inherit"], env });
  const cachedir = path.join(root, "cache");
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`brine master exited with ${child.exitCode}`);
    const key = existsSync(cachedir) ? readdirSync(cachedir).find((n) => /^\..+_key$/.test(n)) : undefined;
    if (key && (await canConnect(retPort)) && (await canConnect(publishPort))) {
      return {
        pid: child.pid!,
        retPort,
        publishPort,
        rootKeyFile: path.join(cachedir, key),
        configDir: etc,
        sockDir: path.join(root, "run"),
        pkiDir: path.join(root, "pki", "master"),
        stop: async () => {
          if (child.exitCode === null) {
            child.kill("SIGTERM");
            await new Promise((r) => {
              const t = setTimeout(() => (child.kill("SIGKILL"), r(undefined)), 15_000);
              child.once("exit", () => (clearTimeout(t), r(undefined)));
            });
          }
          rmSync(root, { recursive: true, force: true });
        },
      };
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error("brine master did not come up within 60 s");
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

function rows(r: SwarmReport, n: number): BenchRow[] {
  const note = `${n} minions, ${r.procs} procs, ${r.errors} errors`;
  const out: BenchRow[] = [
    { figure: `swarm ${n}: minions authenticated`, value: r.authenticated, unit: "minions", target: n, better: "higher", note },
    { figure: `swarm ${n}: auth rate (storm)`, value: r.auth_per_s ?? 0, unit: "auth/s", better: "higher" },
    { figure: `swarm ${n}: auth p99`, value: r.auth_p99_ms ?? NaN, unit: "ms", better: "lower" },
    { figure: `swarm ${n}: time to all accepted`, value: r.time_to_all_accepted_ms ?? NaN, unit: "ms", better: "lower" },
    { figure: `swarm ${n}: ping returns`, value: r.returned, unit: "returns", target: r.expected_returns, better: "higher" },
    { figure: `swarm ${n}: returns rate`, value: r.returns_per_s ?? 0, unit: "returns/s", better: "higher" },
    { figure: `swarm ${n}: time to last return`, value: r.last_return_ms ?? NaN, unit: "ms", better: "lower" },
  ];
  if (r.master_process) {
    out.push(
      { figure: `swarm ${n}: master peak RSS`, value: r.master_process.rss_mb_peak, unit: "MB", better: "lower" },
      { figure: `swarm ${n}: master CPU`, value: r.master_process.cpu_s, unit: "s", better: "lower", note: `${r.master_process.cpu_pct}% over ${r.master_process.wall_s} s` },
    );
  }
  return out;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const n = opts.full ? 5000 : 1000;
  const master = await startBrineMaster();
  try {
    const report = await runSwarm({
      scenario: "ping",
      master: "127.0.0.1",
      retPort: master.retPort,
      minions: n,
      procs: Math.max(2, Math.min(4, Math.ceil(n / 1500))),
      rootKeyFile: master.rootKeyFile,
      masterPid: master.pid,
      idPrefix: "bench-",
      acceptanceWaitMs: 1000,
      randomReauthDelayMs: 0,
      jobTimeoutMs: 60_000,
      progress: false,
    });
    return rows(report, n);
  } finally {
    await master.stop();
  }
}
