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

const program = new Command("salt-run")
  .usage("[options] <function> [arguments]")
  .description("Run a runner on the master (jobs.*, manage.*, cache.*, mine.get, pillar.*, fileserver.*, survey.*, saltutil.sync_*, state.event, state.orchestrate, cluster.*, custom runners; the list is in README.md)")
  .option("-c, --config-dir <dir>", "directory holding the master config", DEFAULT_CONFIG_DIR)
  .option("-t, --timeout <seconds>", "timeout for runners that wait on minions")
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
if (o.timeout !== undefined && !("timeout" in kwarg)) kwarg.timeout = Number(o.timeout);

try {
  const r = await controlCall(cfg.sock_dir, { op: "run", fun, arg, kwarg }, (text) => process.stdout.write(text + "\n"));
  if (r.type === "error") {
    process.stderr.write(`${r.message}\n`);
    await exitWith(1);
  }
  const shown = runnerOutput(r.ret);
  display.show(shown.data, shown.out);
  await exitWith(shown.retcode);
} catch (e) {
  process.stderr.write(`Could not reach the master through ${cfg.sock_dir} (is salt-master running?): ${(e as Error).message}\n`);
  await exitWith(2);
}
