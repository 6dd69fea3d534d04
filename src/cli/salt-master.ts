/**
 * salt-master: run a brine master. `-c DIR` reads DIR/master and DIR/master.d/*.conf as Salt does.
 * `--embedded-root DIR` (what `npm start` uses) keeps everything under DIR, writing a default
 * configuration at DIR/etc/salt/master on first start.
 */
import { Command } from "commander";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { isBrineError } from "../shared/errors.js";
import { acquirePidfile, pidfilePath, type PidfileHold } from "../main-thread/pidfile.js";
import path from "node:path";
import { spawn } from "node:child_process";
import { embeddedDefaultConfigText } from "../shared/config/load.js";
import { configureLogging, getLogger } from "../shared/log.js";
import { MasterServer } from "../main.js";
import { DEFAULT_CONFIG_DIR, configWarnings, loadConfigOrExit, stopOnSignals } from "./common.js";

const program = new Command("salt-master")
  .description("brine: a Salt master (ZeroMQ transport) for unmodified salt-minions")
  .option("-c, --config-dir <dir>", "directory holding the master config file and master.d/", DEFAULT_CONFIG_DIR)
  .option("--embedded-root <dir>", "self-contained mode: config, pki, cache and sockets under <dir> (created with defaults)")
  .option("-l, --log-level <level>", "console log level: all, garbage, trace, debug, profile, info, warning, error, critical, quiet")
  .option("--log-file <path>", "log file path (overrides log_file)")
  .option("--log-file-level <level>", "log file level (overrides log_level_logfile)")
  .option("-d, --daemon", "run in the background (detached)")
  .option("--pid-file <path>", "the master's pidfile (overrides pidfile; default /var/run/salt-master.pid under root_dir)")
  .version("brine 0.1.0 (Salt protocol 3006/3007)", "--version");
program.parse();
const o = program.opts<{ configDir: string; embeddedRoot?: string; logLevel?: string; logFile?: string; logFileLevel?: string; daemon?: boolean; pidFile?: string }>();

let configDir = o.configDir;
if (o.embeddedRoot) {
  const root = path.resolve(o.embeddedRoot);
  configDir = path.join(root, "etc", "salt");
  const file = path.join(configDir, "master");
  if (!existsSync(file)) {
    mkdirSync(configDir, { recursive: true });
    for (const d of ["srv/salt", "srv/pillar"]) mkdirSync(path.join(root, d), { recursive: true });
    writeFileSync(file, embeddedDefaultConfigText(root));
  }
}

const cfg = loadConfigOrExit(configDir);
let pidPath: string;
try {
  pidPath = pidfilePath(cfg, o.pidFile);
} catch (e) {
  process.stderr.write(`${(e as Error).message}\n`);
  process.exit(1);
}
/** Refuses to start (exit 1) when a running master holds the pidfile. */
function heldOrExit(fn: () => PidfileHold): PidfileHold {
  try {
    return fn();
  } catch (e) {
    if (!isBrineError(e) || e.code !== "PIDFILE_LOCKED") throw e;
    process.stderr.write(`${e.message}\n`);
    process.exit(1);
  }
}

/** Set for the detached child of `-d`: it then does what Salt's daemonize does after the fork. */
const DAEMON_CHILD_ENV = "BRINE_SALT_MASTER_DAEMON_CHILD";
if (o.daemon) {
  // refused here, before detaching, so the caller sees why (the detached child takes the file)
  heldOrExit(() => acquirePidfile(pidPath)).release();
  // node's own flags first (process.execArgv: --max-old-space-size, --cpu-prof, ...): the master that runs is
  // started as this one was, only detached
  const args = [...process.execArgv, ...process.argv.slice(1).filter((a) => a !== "-d" && a !== "--daemon")];
  // the child leaves the caller's directory and umask behind as Salt's daemonize does (chdir("/"), umask 022),
  // once it has resolved its paths (DAEMON_CHILD_ENV)
  const child = spawn(process.execPath, args, { detached: true, stdio: "ignore", env: { ...process.env, [DAEMON_CHILD_ENV]: "1" } });
  child.unref();
  process.stdout.write(`salt-master started in the background (pid ${child.pid})\n`);
  process.exit(0);
}

const logFile = o.logFile ?? cfg.log_file;
configureLogging({
  level: o.logLevel ?? String(cfg.log_level ?? "warning"),
  // absolute, so that threads opening it later find the same file whatever the directory then
  file: logFile ? path.resolve(logFile) : logFile,
  fileLevel: o.logFileLevel ?? (cfg.log_level_logfile as string | null) ?? String(cfg.log_level),
});
const log = getLogger("brine.salt-master");
for (const w of configWarnings) getLogger("brine.config").warning(w);
const pidfile = heldOrExit(() => acquirePidfile(pidPath));
if (process.env[DAEMON_CHILD_ENV] === "1") {
  delete process.env[DAEMON_CHILD_ENV];
  process.chdir("/");
  process.umask(0o022);
}

const server = new MasterServer(cfg);
try {
  await server.start();
} catch (e) {
  log.critical(`master failed to start: ${(e as Error).message}`);
  pidfile.release();
  process.exit(1);
}
// before "ready": whoever waits for that line may signal at once, and until a listener is registered a
// SIGTERM has its default action (the process dies without stopping or releasing the pidfile)
stopOnSignals(log, () => server.stop(), () => pidfile.release());
process.stdout.write(`brine salt-master ${cfg.id} ready (publish ${cfg.interface}:${cfg.publish_port}, requests ${cfg.interface}:${cfg.ret_port}, config ${configDir})\n`);
