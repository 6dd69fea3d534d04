/**
 * salt-syndic: brine's syndic beside a lower master (src/syndic/). `-c DIR` is the lower master's configuration
 * directory: `DIR/master` (its ports, sock_dir, cachedir, root key and the `syndic_*` options) and, when
 * present, `DIR/minion` (the syndic's `id`, `pki_dir` and `acceptance_wait_time`), as Salt's salt-syndic
 * reads them. It runs until SIGTERM/SIGINT; the forward queue is on disk, so a restart loses no return.
 */
import { Command } from "commander";
import { isBrineError } from "../shared/errors.js";
import { acquirePidfile, pidfilePath, type PidfileHold } from "../main-thread/pidfile.js";
import { configureLogging, getLogger } from "../shared/log.js";
import { readOption } from "../shared/config/options.js";
import { Syndic } from "../syndic/syndic.js";
import { syndicOptions } from "../syndic/options.js";
import { DEFAULT_CONFIG_DIR, configWarnings, loadConfigOrExit, stopOnSignals } from "./common.js";

const program = new Command("salt-syndic")
  .description("brine: a Salt syndic: signs in to masters of masters (syndic_master) and relays their jobs to this master and its returns back up")
  .option("-c, --config-dir <dir>", "directory holding the lower master's config (and the syndic's minion file)", DEFAULT_CONFIG_DIR)
  .option("-l, --log-level <level>", "console log level: all, garbage, trace, debug, profile, info, warning, error, critical, quiet")
  .option("--log-file <path>", "log file path (overrides syndic_log_file)")
  .option("--log-file-level <level>", "log file level (overrides log_level_logfile)")
  .option("--pid-file <path>", "the syndic's pidfile (overrides syndic_pidfile)")
  .version("brine 0.1.0 (Salt protocol 3006/3007)", "--version");
program.parse();
const o = program.opts<{ configDir: string; logLevel?: string; logFile?: string; logFileLevel?: string; pidFile?: string }>();

const cfg = loadConfigOrExit(o.configDir);
configureLogging({
  level: o.logLevel ?? String(cfg.log_level ?? "warning"),
  file: o.logFile ?? pidfilePath({ ...cfg, pidfile: readOption(cfg, "syndic_log_file") }),
  fileLevel: o.logFileLevel ?? (cfg.log_level_logfile as string | null) ?? String(cfg.log_level),
});
const log = getLogger("brine.salt-syndic");
for (const w of configWarnings) getLogger("brine.config").warning(w);

let opts;
try {
  opts = syndicOptions(cfg, o.configDir);
} catch (e) {
  process.stderr.write(`${(e as Error).message}\n`);
  process.exit(2);
}
let pidfile: PidfileHold;
try {
  pidfile = acquirePidfile(o.pidFile ? pidfilePath(cfg, o.pidFile) : pidfilePath({ ...cfg, pidfile: readOption(cfg, "syndic_pidfile") }));
} catch (e) {
  process.stderr.write(`${isBrineError(e) ? e.message.replace("another master", "another syndic") : (e as Error).message}\n`);
  process.exit(1);
}

const syndic = new Syndic(cfg, opts);
try {
  await syndic.start();
} catch (e) {
  log.critical(`syndic failed to start: ${(e as Error).message}`);
  pidfile.release();
  process.exit(1);
}
// before the "running" line (see salt-master.ts: a SIGTERM before a listener kills the process)
stopOnSignals(log, () => syndic.stop(), () => pidfile.release());
process.stdout.write(`brine salt-syndic ${opts.id} running: masters of masters ${opts.upstreams.map((u) => `${u.host}:${u.port}`).join(", ")}, lower master ${cfg.interface}:${cfg.ret_port} (config ${o.configDir})\n`);

