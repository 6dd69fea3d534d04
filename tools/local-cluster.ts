/**
 * A local master cluster for the tests (test/cluster-e2e), the demo (`npm run cluster:demo`) and the bench
 * (bench/cluster.ts): N brine masters as their own processes (salt-master CLI, so a
 * test can SIGKILL one), each on its own loopback address with the standard ports 4505/4506 (the publish port a
 * master announces is then the balancer's too) and the peer channel on 4520, a shared `cluster_pki_dir` and
 * `cachedir` (Salt's shared-filesystem topology; or with `isolated`, Salt's isolated-filesystem one: nothing shared,
 * a master that starts later joins with the secret and the pinned fingerprint), and a real HAProxy in front (tcp mode, roundrobin, the
 * frontends and timeouts of Salt's master-cluster tutorial) started from its own config file in a temporary
 * directory, never the system service.
 *
 * Fault injection: each master's `brine_cluster_chaos_file` (src/main-thread/cluster/cluster-service.ts) lets partition()
 * cut one master off from the others (both directions), and heal() undo it.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { stringify } from "yaml";
import { TestMinion, type TestMinionOptions } from "../src/lib/minion/test-minion.js";
import type { MinionKeys } from "../src/lib/minion/keys.js";
import { RawClient } from "../src/lib/minion/raw-client.js";
import { decodeWire } from "../src/shared/protocol/msgpack.js";
import { packSalt, sealSalt } from "../src/lib/minion/wire.js";
import { Crypticle } from "../src/shared/protocol/crypticle.js";
import { controlCall } from "../src/lib/client/control-client.js";
import { runnerInput } from "../src/lib/client/args.js";
import { runnerOutput } from "../src/lib/output/display.js";
import { loadMasterConfig } from "../src/shared/config/load.js";
import { seedKeyPair } from "./master-key-pool.js";

export const CLI_DIR = new URL("../src/cli/", import.meta.url);
export const PUB_PORT = 4505;
export const RET_PORT = 4506;
export const POOL_PORT = 4520;
/**
 * How long startMaster() waits for a master's "ready" line, ms: a hang guard, not a speed bound. At load ~30 here
 * job-placement's five masters starting at once took 46-49 s each, and a fresh-clone CI run at load had a master of
 * recover-outbox miss the 60 s this was.
 */
export const masterStartTimeoutMs = 120_000;

/** The haproxy binary, if installed. */
export function haproxyBinary(): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(":").concat(["/usr/sbin", "/usr/local/sbin", "/sbin"])) {
    const p = path.join(dir, "haproxy");
    if (dir && existsSync(p)) return p;
  }
  return undefined;
}

export function portFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

export function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(port, host);
    c.once("connect", () => {
      c.destroy();
      resolve(true);
    });
    c.once("error", () => resolve(false));
  });
}

/** Why a cluster on these addresses cannot run here (a message for a bench or the demo to print), or undefined. */
export async function skipReason(lbHost: string, hosts: string[]): Promise<string | undefined> {
  if (!haproxyBinary()) return "haproxy is not installed (apt-get install haproxy; .ci/run installs it)";
  for (const [h, p] of [[lbHost, PUB_PORT], [lbHost, RET_PORT], ...hosts.flatMap((x) => [[x, PUB_PORT], [x, RET_PORT], [x, POOL_PORT]])] as [string, number][]) {
    if (!(await portFree(h, p))) return `${h}:${p} is taken`;
  }
  return undefined;
}

/**
 * A test's start: fails it, with the reason, when a cluster on these addresses cannot run here (haproxy missing,
 * an address taken: a leftover of an interrupted run, or two suites at once). A test skips only where Salt's
 * source is absent, so this is a failure, never a skip.
 */
export async function clusterPrerequisites(lbHost: string, hosts: string[]): Promise<void> {
  const why = await skipReason(lbHost, hosts);
  if (why) throw new Error(`this cluster test cannot run here: ${why}`);
}

export function haproxyConfig(lbHost: string, hosts: string[], statsSocket: string, checkIntervalMs = 500, maxconn = 8000): string {
  const servers = (port: number) => hosts.map((h, i) => `    server m${i + 1} ${h}:${port} check`).join("\n");
  return `global
    # each connection costs two descriptors (client and server side): stay under a 20000 descriptor limit
    maxconn ${maxconn}
    stats socket ${statsSocket} mode 600 level admin

defaults
    mode tcp
    timeout connect 2s
    retries 3
    option redispatch
    default-server inter ${checkIntervalMs}ms fall 2 rise 2

frontend salt-master-pub
    bind ${lbHost}:${PUB_PORT}
    # equal to the masters' publish_session
    timeout client 86400s
    default_backend salt-master-pub-backend

backend salt-master-pub-backend
    balance roundrobin
    timeout server 86400s
${servers(PUB_PORT)}

frontend salt-master-req
    bind ${lbHost}:${RET_PORT}
    timeout client 1m
    default_backend salt-master-req-backend

backend salt-master-req-backend
    balance roundrobin
    timeout server 1m
${servers(RET_PORT)}
`;
}

export interface MasterProc {
  index: number;
  id: string;
  host: string;
  confDir: string;
  logFile: string;
  chaosFile: string;
  proc: ChildProcess | undefined;
  /** the last 8 KiB its current process wrote to stderr after "ready" (an abort's message lands there) */
  stderrTail?: string;
}

export interface HarnessOptions {
  lbHost: string;
  hosts: string[];
  clusterId?: string;
  /** extra master options for every master */
  extra?: Record<string, unknown>;
  /** keep the temporary root (for the demo) */
  root?: string;
  /** master console log level */
  logLevel?: string;
  /** each master its own `cachedir` (nothing shared but `cluster_pki_dir`): the cluster carries the rest */
  privateCachedir?: boolean;
  /** options of one master, over the others (an isolated filesystem: its own cluster_pki_dir, file_roots …) */
  perMaster?: (m: MasterProc, dir: string) => Record<string, unknown>;
  /**
   * Salt's isolated-filesystem topology: every master its own `cluster_pki_dir`, `cachedir`, `file_roots` and
   * `pillar_roots` (under its directory), `cluster_isolated_filesystem: True` with this `cluster_secret`, and its
   * peers named as `{id, host}` (so the lowest id founds on a first start); nothing is shared.
   */
  isolated?: { secret: string };
  /** start() starts the first `startWith` masters (default all); the others later with startMaster() */
  startWith?: number;
  /** node's own flags for every master process (e.g. --cpu-prof, which NODE_OPTIONS does not take) */
  nodeFlags?: string[];
  /**
   * Masters (by index) that make their own key pair at their first start, as a vanilla install does. The others
   * are given one from tools/master-key-pool.ts (and, in the shared-filesystem topology, the cluster's pair too),
   * which spares each first start ~0.3 s of CPU per pair; a directory that holds a key keeps it.
   */
  ownKeys?: number[];
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runNode(script: string, args: string[], timeoutMs = 60_000): Promise<CliResult> {
  return new Promise((resolve) => {
    const p = endWithThisProcess(spawn(process.execPath, [script, ...args], { stdio: ["ignore", "pipe", "pipe"] }));
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d) => (stdout += d));
    p.stderr.on("data", (d) => (stderr += d));
    const t = setTimeout(() => p.kill("SIGKILL"), timeoutMs);
    p.on("close", (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * What this process must end when it ends: children a harness started that may still run (masters, HAProxy, CLI
 * calls), or anything else a test started outside its own process group (the real-salt harness's daemons, which run
 * in sessions of their own). Each is ended when this process exits or is ended by SIGINT, SIGTERM or SIGHUP (one it
 * has no other handler for), which would otherwise leave them running, holding their loopback addresses (a test
 * process killed by a signal runs no `finally`). Ends are synchronous: an exit hook can run nothing else.
 */
const atEnd = new Set<() => void>();
let reaperInstalled = false;

/** Runs `end` when this process ends (see atEnd), unless the returned function is called first. */
export function onThisProcessEnd(end: () => void): () => void {
  atEnd.add(end);
  if (!reaperInstalled) {
    reaperInstalled = true;
    const reap = () => {
      const ends = [...atEnd];
      atEnd.clear();
      for (const e of ends) {
        try {
          e();
        } catch {
          // the next one still runs
        }
      }
    };
    process.on("exit", reap);
    for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
      const on = () => {
        // another handler (the demo's graceful stop) decides; the exit hook reaps what it leaves
        if (process.listenerCount(sig) > 1) return;
        reap();
        process.off(sig, on);
        // end as the signal ends a process that handles none
        process.kill(process.pid, sig);
      };
      process.on(sig, on);
    }
  }
  return () => atEnd.delete(end);
}

/** Ends `p` (SIGKILL) with this process unless it has closed first (see atEnd); returns it. */
export function endWithThisProcess<T extends ChildProcess>(p: T): T {
  const forget = onThisProcessEnd(() => {
    if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
  });
  p.once("close", forget);
  return p;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `f` until it returns a value that is not undefined; throws naming `what` after `ms`. */
export async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 30_000, everyMs = 250): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? ` (${(last as Error).message})` : ""}`);
    await sleep(everyMs);
  }
}

export class ClusterHarness {
  readonly root: string;
  readonly shared: string;
  readonly masters: MasterProc[] = [];
  private haproxy: ChildProcess | undefined;
  private haproxyLog = "";
  readonly statsSocket: string;

  private constructor(readonly opts: HarnessOptions) {
    this.root = opts.root ?? mkdtempSync(path.join(os.tmpdir(), "brine-cluster-"));
    this.shared = path.join(this.root, "shared");
    this.statsSocket = path.join(this.root, "haproxy.sock");
    opts.hosts.forEach((host, i) => {
      const id = `m${i + 1}`;
      const dir = path.join(this.root, id);
      this.masters.push({ index: i, id, host, confDir: path.join(dir, "etc"), logFile: path.join(dir, "master.log"), chaosFile: path.join(dir, "chaos"), proc: undefined });
    });
  }

  /** Writes every config, starts the masters and HAProxy. */
  static async start(opts: HarnessOptions): Promise<ClusterHarness> {
    const h = new ClusterHarness(opts);
    try {
      const first = h.masters.slice(0, opts.startWith ?? h.masters.length);
      for (const m of first) h.writeConfig(m);
      for (const m of first) await h.seedKeys(m.index);
      await Promise.all(first.map((m) => h.startMaster(m.index)));
      await h.startHaproxy(first.length);
    } catch (e) {
      await h.stop();
      throw e;
    }
    return h;
  }

  /** options set on one master after the start (configure()), over every other source */
  private readonly overrides = new Map<number, Record<string, unknown>>();
  /** each master's sock_dir, read from its config once (configure() forgets it) */
  private readonly sockDirs = new Map<number, string>();

  /** The directory of master i (its config, pki, and in isolated mode its cachedir and roots). */
  dirOf(i: number): string {
    return path.join(this.root, this.masters[i]!.id);
  }

  masterConfig(m: MasterProc): Record<string, unknown> {
    const dir = path.join(this.root, m.id);
    const iso = this.opts.isolated;
    const own = iso
      ? {
          cluster_isolated_filesystem: true,
          cluster_secret: iso.secret,
          cluster_peers: this.masters.filter((x) => x !== m).map((x) => ({ id: x.id, host: x.host })),
          cluster_pki_dir: path.join(dir, "cluster-pki"),
          cachedir: path.join(dir, "cache"),
          file_roots: { base: [path.join(dir, "srv", "salt")] },
          pillar_roots: { base: [path.join(dir, "srv", "pillar")] },
        }
      : {};
    return {
      id: m.id,
      interface: m.host,
      publish_port: PUB_PORT,
      ret_port: RET_PORT,
      cluster_id: this.opts.clusterId ?? "brine-e2e",
      cluster_peers: this.opts.hosts.filter((x) => x !== m.host),
      cluster_pki_dir: path.join(this.shared, "pki"),
      cachedir: this.opts.privateCachedir ? path.join(dir, "cache") : path.join(this.shared, "cache"),
      pki_dir: path.join(dir, "pki"),
      sock_dir: path.join(dir, "sock"),
      // each master its own (the default /var/run/salt-master.pid is one per host)
      pidfile: path.join(dir, "salt-master.pid"),
      log_file: m.logFile,
      log_level_logfile: "info",
      file_roots: { base: [path.join(this.shared, "srv", "salt")] },
      pillar_roots: { base: [path.join(this.shared, "srv", "pillar")] },
      auto_accept: true,
      worker_threads: 1,
      loop_interval: 60,
      brine_cluster_chaos_file: m.chaosFile,
      brine_cluster_unhealthy_after_ms: 1000,
      // BRINE_TEST_MINION_TRANSPORT=native: the masters serve minions on brine's own ZMTP server (as test/helpers/master.ts)
      ...(process.env.BRINE_TEST_MINION_TRANSPORT ? { brine_minion_transport: process.env.BRINE_TEST_MINION_TRANSPORT } : {}),
      ...own,
      ...this.opts.extra,
      ...this.opts.perMaster?.(m, dir),
      ...this.overrides.get(m.index),
    };
  }

  private writeConfig(m: MasterProc): void {
    mkdirSync(m.confDir, { recursive: true });
    if (!this.opts.isolated) mkdirSync(path.join(this.shared, "srv", "salt"), { recursive: true });
    writeFileSync(path.join(m.confDir, "master"), stringify(this.masterConfig(m)));
  }

  /** Sets options of master i (over every other source) and rewrites its config; they apply at its next start. */
  configure(i: number, over: Record<string, unknown>): void {
    this.overrides.set(i, { ...this.overrides.get(i), ...over });
    this.sockDirs.delete(i);
    this.writeConfig(this.masters[i]!);
  }

  /**
   * Gives master i a pooled key pair (tools/master-key-pool.ts) unless it is one of `ownKeys` or holds one, and in
   * the shared-filesystem topology the cluster's pair unless its cluster_pki_dir holds one. Called before the
   * master starts, and before any master of start() starts (the cluster's pair is one file for all of them).
   */
  private async seedKeys(i: number): Promise<void> {
    if (this.opts.ownKeys?.includes(i)) return;
    const cfg = this.masterConfig(this.masters[i]!);
    if ((cfg.keysize ?? 2048) !== 2048) return;
    await seedKeyPair(String(cfg.pki_dir), "master");
    if (!cfg.cluster_isolated_filesystem) await seedKeyPair(String(cfg.cluster_pki_dir), "cluster");
  }

  /** Starts (or restarts) master i and waits for its "ready" line. */
  async startMaster(i: number): Promise<void> {
    const m = this.masters[i]!;
    if (!existsSync(path.join(m.confDir, "master"))) this.writeConfig(m);
    await this.seedKeys(i);
    const script = new URL("salt-master.js", CLI_DIR).pathname;
    const p = endWithThisProcess(
      spawn(process.execPath, [...(this.opts.nodeFlags ?? []), script, "-c", m.confDir, "-l", this.opts.logLevel ?? "warning"], { stdio: ["ignore", "pipe", "pipe"] }),
    );
    m.proc = p;
    let out = "";
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${m.id} did not start within ${masterStartTimeoutMs / 1000} s: ${out}`)), masterStartTimeoutMs);
      const on = (d: Buffer) => {
        out += d.toString();
        if (out.includes(" ready (")) {
          clearTimeout(t);
          resolve();
        }
      };
      p.stdout!.on("data", on);
      p.stderr!.on("data", (d: Buffer) => (out += d.toString()));
      p.once("exit", (code) => {
        clearTimeout(t);
        reject(new Error(`${m.id} exited (${code}) while starting: ${out}`));
      });
    });
    p.removeAllListeners("exit");
    // keep draining the pipes so the master never blocks on a full one (and stop growing `out`)
    p.stdout!.removeAllListeners("data").resume();
    p.stderr!.removeAllListeners("data");
    m.stderrTail = "";
    p.stderr!.on("data", (d: Buffer) => (m.stderrTail = (m.stderrTail + d.toString()).slice(-8192)));
  }

  kill(i: number, signal: NodeJS.Signals = "SIGKILL"): void {
    const m = this.masters[i]!;
    m.proc?.kill(signal);
  }

  async waitExit(i: number, ms = 15_000): Promise<void> {
    const p = this.masters[i]!.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      p.once("exit", () => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  /** Starts HAProxy with every master as a server, and waits until the first `up` masters are UP in it. */
  private async startHaproxy(up: number): Promise<void> {
    const bin = haproxyBinary();
    if (!bin) throw new Error("haproxy is not installed");
    const cfgFile = path.join(this.root, "haproxy.cfg");
    writeFileSync(cfgFile, haproxyConfig(this.opts.lbHost, this.opts.hosts, this.statsSocket));
    const check = spawnSync(bin, ["-c", "-f", cfgFile], { encoding: "utf8" });
    if (check.status !== 0) throw new Error(`haproxy refused its config: ${check.stdout}${check.stderr}`);
    const p = endWithThisProcess(spawn(bin, ["-db", "-f", cfgFile], { stdio: ["ignore", "pipe", "pipe"] }));
    this.haproxy = p;
    p.stdout!.on("data", (d) => (this.haproxyLog += d));
    p.stderr!.on("data", (d) => (this.haproxyLog += d));
    await until("haproxy to listen", async () => {
      if (p.exitCode !== null) throw new Error(`haproxy exited: ${this.haproxyLog}`);
      return (await canConnect(this.opts.lbHost, RET_PORT)) ? true : undefined;
    }, 10_000, 50);
    await this.waitUp(this.masters.slice(0, up).map((m) => m.index));
  }

  /** The HAProxy process's id, once started. */
  get haproxyPid(): number | undefined {
    return this.haproxy?.pid;
  }

  /** Waits until HAProxy's health checks see masters `which` UP in both backends. */
  async waitUp(which: number[], ms = 15_000): Promise<void> {
    const ids = new Set(which.map((i) => this.masters[i]!.id));
    await until(`haproxy to see ${[...ids].join(", ")} up`, async () => {
      const st = (await this.haproxyServers()).filter((s) => ids.has(s.server));
      return st.length === ids.size * 2 && st.every((s) => s.status === "UP") ? true : undefined;
    }, ms);
  }

  /** HAProxy's view of each backend server (`show stat`): backend, server, status, current sessions. */
  async haproxyServers(): Promise<{ backend: string; server: string; status: string; scur: number; stot: number }[]> {
    const text = await this.haproxyCommand("show stat");
    const lines = text.trim().split("\n");
    const head = lines[0]!.replace(/^# /, "").split(",");
    const col = (name: string) => head.indexOf(name);
    return lines
      .slice(1)
      .map((l) => l.split(","))
      .filter((f) => f[col("svname")] !== "FRONTEND" && f[col("svname")] !== "BACKEND")
      .map((f) => ({ backend: f[col("pxname")]!, server: f[col("svname")]!, status: f[col("status")]!, scur: Number(f[col("scur")]), stot: Number(f[col("stot")]) }));
  }

  /** One command on HAProxy's admin socket (`disable server …`); its answer. */
  haproxyCommand(cmd: string): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      const c = net.connect(this.statsSocket);
      let buf = "";
      c.on("connect", () => c.write(`${cmd}\n`));
      c.on("data", (d) => (buf += d));
      c.on("end", () => resolve(buf));
      c.on("error", reject);
    });
  }

  /**
   * Takes master i out of the balancer (both backends) and closes the connections HAProxy holds to it, so its
   * minions reconnect through the balancer to the other masters, as when a master dies, but the master runs on.
   */
  async drain(i: number): Promise<void> {
    const id = this.masters[i]!.id;
    for (const b of ["salt-master-pub-backend", "salt-master-req-backend"]) {
      await this.haproxyCommand(`disable server ${b}/${id}`);
      await this.haproxyCommand(`shutdown sessions server ${b}/${id}`);
    }
  }

  /** Puts master i back into the balancer. */
  async undrain(i: number): Promise<void> {
    const id = this.masters[i]!.id;
    for (const b of ["salt-master-pub-backend", "salt-master-req-backend"]) await this.haproxyCommand(`enable server ${b}/${id}`);
  }

  /** Only master i takes new connections through the balancer (the others keep what they have). */
  async only(i: number): Promise<void> {
    for (const m of this.masters) {
      for (const b of ["salt-master-pub-backend", "salt-master-req-backend"]) await this.haproxyCommand(`${m.index === i ? "enable" : "disable"} server ${b}/${m.id}`);
    }
  }

  salt(i: number, args: string[], timeoutMs = 90_000): Promise<CliResult> {
    return runNode(new URL("salt.js", CLI_DIR).pathname, ["-c", this.masters[i]!.confDir, ...args], timeoutMs);
  }

  saltRun(i: number, args: string[], timeoutMs = 60_000): Promise<CliResult> {
    return runNode(new URL("salt-run.js", CLI_DIR).pathname, ["-c", this.masters[i]!.confDir, ...args], timeoutMs);
  }

  saltKey(i: number, args: string[], timeoutMs = 60_000): Promise<CliResult> {
    return runNode(new URL("salt-key.js", CLI_DIR).pathname, ["-c", this.masters[i]!.confDir, ...args], timeoutMs);
  }

  /**
   * `salt-run cluster.<fn> [words] --out json` on master i, without the salt-run process: the same control call
   * with the words salt-run would pass (runnerInput), the return as its JSON output reads back; an error reply
   * or a non-zero retcode throws, as salt-run exits non-zero. A salt-run process costs ~0.4 s of CPU and the
   * cluster tests poll with this; saltRun() runs the command line itself.
   */
  async clusterRunner(i: number, fn: string, words: string[] = []): Promise<any> {
    const { arg, kwarg } = runnerInput(words);
    const r = await this.runnerCall(i, `cluster.${fn}`, arg, kwarg);
    const shown = runnerOutput(r);
    if (shown.retcode !== 0) throw new Error(`cluster.${fn} on m${i + 1}: retcode ${shown.retcode}: ${JSON.stringify(shown.data)}`);
    return JSON.parse(JSON.stringify(shown.data) ?? "null");
  }

  /** A runner on master i through its control socket (no salt-run process per call): its return, or an error naming the master. */
  controlRunner(i: number, fun: string, arg: unknown[] = []): Promise<any> {
    return this.runnerCall(i, fun, arg, {});
  }

  private async runnerCall(i: number, fun: string, arg: unknown[], kwarg: Record<string, unknown>): Promise<any> {
    let sockDir = this.sockDirs.get(i);
    if (sockDir === undefined) this.sockDirs.set(i, (sockDir = loadMasterConfig(this.masters[i]!.confDir).sock_dir));
    const r = await controlCall(sockDir, { op: "run", fun, arg, kwarg });
    if (r.type !== "return") throw new Error(`${fun} on m${i + 1}: ${r.message ?? r.type}`);
    return r.ret;
  }

  /** Waits until the live masters `alive` agree on one leader (other than `not`), and `voters` voters. */
  /**
   * Isolated topology, master 0 started alone (`startWith: 1`): reads the `cluster.pub` fingerprint from its
   * `salt-key -F` as an operator does, starts `joiners` with it pinned, and waits for all of them up and for a leader
   * with every one a voter. Returns the fingerprint.
   */
  async joinPinned(joiners: number[]): Promise<string> {
    const f = await this.saltKey(0, ["-F"]);
    const fp = /^cluster\.pub:\s+(\S+)$/m.exec(f.stdout)?.[1];
    if (f.code !== 0 || !fp) throw new Error(`salt-key -F on m1 printed no cluster.pub line: ${f.stdout}${f.stderr}`);
    for (const i of joiners) this.configure(i, { cluster_pub_fingerprint: fp });
    await Promise.all(joiners.map((i) => this.startMaster(i)));
    const all = [0, ...joiners];
    await this.waitUp(all);
    await this.waitLeader(all, all.length, 60_000);
    return fp;
  }

  async waitLeader(alive: number[], voters: number, ms = 30_000, not?: string): Promise<string> {
    return until(`a leader seen by ${alive.map((i) => this.masters[i]!.id).join(", ")}`, async () => {
      const views = await Promise.all(alive.map((i) => this.clusterRunner(i, "members")));
      const leader = views[0]?.leader_id;
      if (!leader || leader === not || !views.every((v) => v.leader_id === leader && v.voter_count === voters)) return undefined;
      return leader as string;
    }, ms, 300);
  }

  /** Cuts master i off from the others (both directions), as a network partition would. */
  partition(i: number): void {
    const me = this.masters[i]!;
    writeFileSync(me.chaosFile, this.masters.filter((m) => m !== me).map((m) => m.id).join("\n"));
    for (const m of this.masters) if (m !== me) writeFileSync(m.chaosFile, me.id);
  }

  heal(): void {
    for (const m of this.masters) writeFileSync(m.chaosFile, "");
  }

  async stop(keep = false): Promise<void> {
    for (const m of this.masters) {
      if (m.proc && m.proc.exitCode === null && m.proc.signalCode === null) m.proc.kill("SIGTERM");
    }
    await Promise.all(this.masters.map((m) => this.waitExit(m.index, 15_000)));
    for (const m of this.masters) if (m.proc && m.proc.exitCode === null && m.proc.signalCode === null) m.proc.kill("SIGKILL");
    if (this.haproxy && this.haproxy.exitCode === null) {
      this.haproxy.kill("SIGTERM");
      await new Promise((r) => this.haproxy!.once("exit", r));
    }
    if (!keep) rmSync(this.root, { recursive: true, force: true });
  }
}

/** `salt --out json` prints one document per minion. */
export function parseReturns(stdout: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const doc of `\n${stdout.trim()}`.split(/\n(?=\{)/)) {
    if (doc.trim() === "") continue;
    Object.assign(out, JSON.parse(doc));
  }
  return out;
}

export function minionThrough(host: string, id: string, keys: MinionKeys, retPort = RET_PORT, extra: Partial<TestMinionOptions> = {}): TestMinion {
  return new TestMinion({
    id,
    master: host,
    retPort,
    keys,
    acceptanceWaitMs: 200,
    randomReauthDelayMs: 0,
    reconDefaultMs: 100,
    reconMaxMs: 500,
    authTimeoutMs: 5000,
    requestTimeoutMs: 5000,
    returnTimeoutMinMs: 2000,
    returnTimeoutMaxMs: 3000,
    ...extra,
  });
}

/**
 * A `_minion_event` request frame of signed-in minion `m` as it sends it (and as someone on the path captures it):
 * the envelope's bytes, v3 (3007: session key, ts, tok) or v2 (3006.8: the publish AES key).
 */
export function minionEventFrame(m: TestMinion, protocol: "v3" | "v2", nonce: string, tag: string): Buffer {
  const creds = m.creds!;
  const inner: Record<string, unknown> = { cmd: "_minion_event", id: m.id, tag, data: {}, nonce };
  if (protocol === "v2") return packSalt({ enc: "aes", load: sealSalt(new Crypticle(creds.aes), inner), version: 2 });
  Object.assign(inner, { ts: Math.floor(Date.now() / 1000), tok: m.keys.tok });
  return packSalt({ enc: "aes", load: sealSalt(new Crypticle(creds.session!), inner), version: 3, id: m.id, enc_algo: "OAEP-SHA1", sig_algo: "PKCS1v15-SHA1" });
}

/** What the master at `host` answers one request frame: "accepted" (a reply sealed for the minion), or the refusal. */
export async function frameAnswer(host: string, bytes: Buffer, retPort = RET_PORT): Promise<string> {
  const raw = new RawClient({ host, port: retPort, timeoutMs: 10_000 });
  try {
    const r = decodeWire(await raw.request(bytes));
    return Buffer.isBuffer(r) ? "accepted" : JSON.stringify(r);
  } finally {
    raw.close();
  }
}
