/**
 * Start a brine master in this process for a test: its own temporary root (config, pki, cache,
 * sockets), free loopback ports, one worker thread per lane unless told otherwise.
 */
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { MasterServer } from "../../src/main.js";
import { configureLogging } from "../../src/shared/log.js";
import { freePort } from "../../tools/free-port.js";
import { seedKeyPair } from "../../tools/master-key-pool.js";
export { freePort };


export interface TestMaster {
  cfg: MasterConfig;
  server: MasterServer;
  root: string;
  retPort: number;
  publishPort: number;
  pkiDir: string;
  cachedir: string;
  sockDir: string;
  rootKey: string;
  /** stop the master; `keepFiles` leaves the root for a restart */
  stop(keepFiles?: boolean): Promise<void>;
  /** restart on the same root and ports (a new MasterServer: new AES key, same keys and job cache) */
  restart(): Promise<TestMaster>;
}

export interface TestMasterOptions {
  /** also log, at info, to this file (every thread of the master writes to it) */
  logFile?: string;
}

/** The minion-facing transport the environment asks the test masters to use (BRINE_TEST_MINION_TRANSPORT). */
export function transportFromEnv(): MasterConfig["brine_minion_transport"] | undefined {
  const t = process.env.BRINE_TEST_MINION_TRANSPORT;
  if (t === undefined || t === "") return undefined;
  if (t !== "libzmq" && t !== "native") throw new Error(`BRINE_TEST_MINION_TRANSPORT must be libzmq or native, not ${JSON.stringify(t)}`);
  return t;
}

export async function startTestMaster(overrides: Partial<MasterConfig> = {}, root?: string, opts: TestMasterOptions = {}): Promise<TestMaster> {
  configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet", file: opts.logFile, fileLevel: "info" });
  const dir = root ?? mkdtempSync(path.join(os.tmpdir(), "brine-t-"));
  const retPort = overrides.ret_port ?? (await freePort());
  const publishPort = overrides.publish_port ?? (await freePort());
  // a clustered test master's peer channel on a port of its own: the default cluster_pool_port (4520) is one port for
  // every test file (and every helper's run) that starts one at once ("cannot listen on 127.0.0.1:4520")
  const poolPort = overrides.cluster_id && overrides.cluster_pool_port === undefined ? await freePort() : undefined;
  const cfg: MasterConfig = {
    ...masterDefaults(),
    id: "test_master",
    interface: "127.0.0.1",
    root_dir: dir,
    pki_dir: path.join(dir, "pki", "master"),
    cachedir: path.join(dir, "cache"),
    sock_dir: path.join(dir, "sock"),
    log_file: path.join(dir, "log", "master"),
    file_roots: { base: [path.join(dir, "srv", "salt")] },
    pillar_roots: { base: [path.join(dir, "srv", "pillar")] },
    worker_threads: 1,
    loop_interval: 3600,
    // BRINE_TEST_MINION_TRANSPORT=libzmq (or native, the default) runs a suite's masters on that minion-facing
    // transport (a test that names the transport in its overrides keeps it)
    ...(transportFromEnv() ? { brine_minion_transport: transportFromEnv() } : {}),
    ...overrides,
    ret_port: retPort,
    publish_port: publishPort,
    ...(poolPort !== undefined ? { cluster_pool_port: poolPort } : {}),
  };
  for (const d of cfg.file_roots.base ?? []) mkdirSync(d, { recursive: true });
  // a pre-made pair (tools/master-key-pool.ts) unless pki_dir holds one or the test asks for another keysize (which
  // the master then generates): the master's own generation is ~0.3 s of CPU a start, on this thread
  if (cfg.keysize === 2048) await seedKeyPair(cfg.pki_dir, "master");
  const server = new MasterServer(cfg);
  await server.start();
  const tm: TestMaster = {
    cfg,
    server,
    root: dir,
    retPort,
    publishPort,
    pkiDir: cfg.pki_dir,
    cachedir: cfg.cachedir,
    sockDir: cfg.sock_dir,
    rootKey: readFileSync(path.join(cfg.cachedir, `.${cfg.user}_key`), "utf8").trim(),
    async stop(keepFiles = false) {
      await server.stop();
      if (!keepFiles) rmSync(dir, { recursive: true, force: true });
    },
    async restart() {
      await server.stop();
      return startTestMaster({ ...overrides, ret_port: retPort, publish_port: publishPort, ...(poolPort !== undefined ? { cluster_pool_port: poolPort } : {}) }, dir, opts);
    },
  };
  return tm;
}
