/** salt-run: run a runner inside the master (in a runner thread), reached through its control socket. */
import { Command } from "commander";
import { conditionInput } from "../lib/client/args.js";
import { controlCall } from "../lib/client/control-client.js";
import { formatResult, OUTPUTTERS, type OutName } from "../lib/output/outputters.js";
import { DEFAULT_CONFIG_DIR, exitWith, loadConfigOrExit, setupCliLogging } from "./common.js";

const program = new Command("salt-run")
  .usage("[options] <function> [arguments]")
  .description("Run a runner on the master (jobs.*, manage.*, cache.*, mine.get, pillar.*, fileserver.*, survey.*, saltutil.sync_*, state.event, state.orchestrate, cluster.*, custom runners; the list is in README.md)")
  .option("-c, --config-dir <dir>", "directory holding the master config", DEFAULT_CONFIG_DIR)
  .option("--out <outputter>", `output format: ${OUTPUTTERS.join(", ")}`, "nested")
  .option("-t, --timeout <seconds>", "timeout for runners that wait on minions")
  .option("-l, --log-level <level>", "console log level", "warning")
  .argument("<function>")
  .argument("[arguments...]")
  .allowExcessArguments(true);
program.parse();
const o = program.opts();
const [fun, words] = program.processedArgs as [string, string[]];
setupCliLogging(o.logLevel);
const cfg = loadConfigOrExit(o.configDir);
const out = (OUTPUTTERS as readonly string[]).includes(o.out) ? (o.out as OutName) : "nested";

const conditioned = conditionInput(words ?? []);
const last = conditioned[conditioned.length - 1];
let kwarg: Record<string, unknown> = {};
let arg = conditioned;
if (last && typeof last === "object" && (last as Record<string, unknown>).__kwarg__ === true) {
  const { __kwarg__: _k, ...rest } = last as Record<string, unknown>;
  kwarg = rest;
  arg = conditioned.slice(0, -1);
}
if (o.timeout !== undefined && !("timeout" in kwarg)) kwarg.timeout = Number(o.timeout);

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v) && !Buffer.isBuffer(v);

/**
 * What salt-run prints, as Salt's print_async_event chooses: `--out` when given; else the outputter a return
 * names (`{data, outputter}` prints its data; with more keys, such as orchestrate's retcode, the whole return,
 * which the highstate outputter unwraps). An outputter brine does not have yet falls back to nested.
 */
function shownResult(ret: unknown): { out: OutName; data: unknown } {
  if (program.getOptionValueSource("out") !== "default" || !isObj(ret) || typeof ret.outputter !== "string") return { out, data: ret };
  const named = (OUTPUTTERS as string[]).includes(ret.outputter) ? (ret.outputter as OutName) : "nested";
  const keys = Object.keys(ret);
  return { out: named, data: keys.length === 2 && "data" in ret ? ret.data : ret };
}

/** Salt's salt-run exit status: the return's `retcode` (or `data.retcode`), else 0. */
function retcodeOf(ret: unknown): number {
  if (isObj(ret) && typeof ret.retcode === "number") return ret.retcode;
  if (isObj(ret) && isObj(ret.data) && typeof ret.data.retcode === "number") return ret.data.retcode;
  return 0;
}

try {
  const r = await controlCall(cfg.sock_dir, { op: "run", fun, arg, kwarg }, (text) => process.stdout.write(text + "\n"));
  if (r.type === "error") {
    process.stderr.write(`${r.message}\n`);
    await exitWith(1);
  }
  const shown = shownResult(r.ret);
  const s = formatResult(shown.out, shown.data);
  if (s) process.stdout.write(s + "\n");
  await exitWith(retcodeOf(r.ret));
} catch (e) {
  process.stderr.write(`Could not reach the master through ${cfg.sock_dir} (is salt-master running?): ${(e as Error).message}\n`);
  await exitWith(2);
}
