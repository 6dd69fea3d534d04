/**
 * salt-run: run a runner inside the master (in a runner thread), reached through its control socket. A return
 * that names its outputter ({"outputter": "highstate", "data": ...}, as state.orchestrate's) is printed with
 * it (Salt's print_async_event); --out wins. A return carrying a numeric retcode sets the exit code.
 */
import { Command } from "commander";
import { runnerInput } from "../lib/client/args.js";
import { controlCall } from "../lib/client/control-client.js";
import { addOutputOptions, makeDisplay, runnerOutput } from "../lib/output/display.js";
import { DEFAULT_CONFIG_DIR, exitWith, loadConfigOrExit, setupCliLogging } from "./common.js";
import { getLogger } from "../shared/log.js";

const log = getLogger("salt.cli.run");

const program = new Command("salt-run")
  .usage("[options] <function> [arguments]")
  .description("Run a runner on the master (jobs.*, manage.*, cache.*, mine.get, pillar.*, fileserver.*, survey.*, saltutil.sync_*, state.event, state.orchestrate, cluster.*, custom runners; the list is in README.md)")
  .option("-c, --config-dir <dir>", "directory holding the master config", DEFAULT_CONFIG_DIR)
  .option("-t, --timeout <seconds>", "timeout for runners that wait on minions")
  .option("--async", "Start the runner operation and immediately return control (its job id is in the warning logged; the result goes to the job cache and the event bus)")
  .option("-l, --log-level <level>", "console log level", "warning")
  .argument("<function>")
  .argument("[arguments...]")
  .allowExcessArguments(true);
addOutputOptions(program);
program.parse();
const o = program.opts();
const [fun, words] = program.processedArgs as [string, string[]];
setupCliLogging(o.logLevel);
const cfg = loadConfigOrExit(o.configDir);
const display = makeDisplay(o, cfg);

const { arg, kwarg } = runnerInput(words ?? []);
// -t is the call's timeout option (Salt's salt-run sets opts["timeout"]: what runners that wait on minions wait),
// not one of the runner's arguments
const timeout = o.timeout === undefined ? undefined : Number(o.timeout);
if (timeout !== undefined && !(Number.isFinite(timeout) && timeout > 0)) {
  process.stderr.write(`salt-run: error: -t/--timeout must be a number of seconds above 0, not '${o.timeout}'\n`);
  await exitWith(2);
}

async function unreachable(e: unknown): Promise<never> {
  process.stderr.write(`Could not reach the master through ${cfg.sock_dir} (is salt-master running?): ${(e as Error).message}\n`);
  return exitWith(2);
}

if (o.async) {
  // Salt's salt-run --async (salt/runner.py Runner.run): the function must exist (else "'x' is not available."), then the
  // runner goes on in the master by itself; salt-run prints nothing on stdout, logs the tag it runs under, exits 0
  try {
    const r = await controlCall(cfg.sock_dir, { op: "run", fun, arg, kwarg, async: true, ...(timeout !== undefined ? { timeout } : {}) });
    if (r.type === "error") {
      process.stderr.write(`${r.message}\n`);
      await exitWith(1);
    }
    log.warning(
      "Running in asynchronous mode. Results of this execution may be collected by attaching to the master event bus or by examining the master job cache, if configured. " +
        `This execution is running under tag salt/run/${String(r.ret)}`,
    );
    await exitWith(0);
  } catch (e) {
    await unreachable(e);
  }
}

// No timeout of its own: salt-run waits for the runner's return however long it takes, as Salt's does (its runner runs
// in its own process; `-t` is only the runner's option). SIGINT or SIGTERM ends the call as Salt's does
// (salt/scripts.py _handle_signals raises SystemExit in the runner): the master stops the runner when this client
// leaves and records its job as failed (control-server.ts), and salt-run exits 1, the failed runner's retcode.
let jid: string | undefined;
const leave = (signal: NodeJS.Signals) => {
  if (signal === "SIGINT") process.stderr.write(`\nExiting gracefully on Ctrl-c\n${jid ? `The runner is stopped; its job ${jid} is recorded as failed.\n` : ""}`);
  void exitWith(1);
};
process.once("SIGINT", leave);
process.once("SIGTERM", leave);

try {
  const r = await controlCall(
    cfg.sock_dir,
    { op: "run", fun, arg, kwarg, ...(timeout !== undefined ? { timeout } : {}) },
    (text) => process.stdout.write(text + "\n"),
    (j) => {
      jid = j;
      log.debug(`runner ${fun}: jid ${j}`);
    },
  );
  if (r.type === "error") {
    process.stderr.write(`${r.message}\n`);
    await exitWith(1);
  }
  const shown = runnerOutput(r.ret);
  display.show(shown.data, shown.out);
  await exitWith(shown.retcode);
} catch (e) {
  await unreachable(e);
}
