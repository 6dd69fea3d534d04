/**
 * The output options every Salt CLI takes (salt/utils/parsers.py OutputOptionsMixIn) and Salt's
 * display_output: --out/--output, --out-indent, --out-file (emptied at start unless --out-file-append),
 * --no-color, --force-color, --state-output, --state-verbose; colour when stdout is a terminal.
 */
import { appendFileSync, existsSync, writeFileSync } from "node:fs";
import { Option, type Command } from "commander";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { chooseOutputter, OUTPUTTERS, render } from "./outputters.js";
import type { OutOpts } from "./opts.js";

export function addOutputOptions(cmd: Command): Command {
  return cmd
    .option("--out, --output <outputter>", `print the output with this outputter: ${OUTPUTTERS.filter((o) => o !== "no_return").join(", ")}`)
    .option("--out-indent, --output-indent <n>", "indent the output by this many spaces (negative: none), for the outputters that indent")
    .option("--out-file, --output-file <file>", "write the output to this file (emptied first unless --out-file-append)")
    .option("--out-file-append, --output-file-append", "append the output to --out-file")
    .option("--no-color", "no colour") // commander: sets o.color = false
    .addOption(new Option("--no-colour").hideHelp())
    .option("--force-color", "colour even when the output is not a terminal")
    .addOption(new Option("--force-colour").hideHelp())
    .option("--state-output, --state_output <layout>", "highstate layout: full, terse, mixed, changes or filter (and *_id); overrides state_output")
    .option("--state-verbose, --state_verbose <bool>", "highstate: show states that succeeded without changes (True/False); overrides state_verbose");
}

export interface Display {
  /** Salt's display_output: the outputter's text, to --out-file or stdout (nothing when it is empty) */
  show(data: unknown, out?: string, extra?: Partial<OutOpts>): void;
  /** the outputter a return with outputter `out` is printed with */
  outputter(out?: string): string;
  /** the CLI's --out, if given */
  readonly output: string | undefined;
  readonly opts: OutOpts;
}

function parseIndent(v: unknown): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n)) throw new Error(`option --out-indent: invalid integer value: '${String(v)}'`);
  return n;
}

/** The display for a CLI's parsed options (commander's camelCase) over the master config. */
export function makeDisplay(o: Record<string, unknown>, cfg: MasterConfig, cli: { fun?: string | string[]; static?: boolean; arg?: unknown[] } = {}): Display {
  // commander names each option after its last long flag: output, outputIndent, outputFile, state_output, ...
  const output = typeof o.output === "string" ? o.output : undefined;
  // Salt logs this (at error level, on the console) and prints with nested
  if (output && !(OUTPUTTERS as readonly string[]).includes(output)) process.stderr.write(`[ERROR   ] Invalid outputter ${output} specified, fall back to nested\n`);
  const force = Boolean(o.forceColor || o.forceColour);
  const noColor = o.color === false || o.colour === false;
  const color = force ? true : noColor ? false : Boolean(process.stdout.isTTY);
  let stateVerbose: boolean = cfg.state_verbose ?? true;
  if (typeof o.state_verbose === "string") stateVerbose = !/^(false|False)$/.test(o.state_verbose) && o.state_verbose !== "";
  const indent = parseIndent(o.outputIndent);
  const opts: OutOpts = {
    color,
    state_output: typeof o.state_output === "string" ? o.state_output : cfg.state_output,
    state_verbose: stateVerbose,
    state_output_diff: Boolean(o.outputDiff) || cfg.state_output_diff,
    state_output_profile: cfg.state_output_profile,
    state_output_pct: cfg.state_output_pct,
    state_compress_ids: cfg.state_compress_ids,
    state_tabular: cfg.state_tabular,
    state_output_exclude: cfg.state_output_exclude,
    state_output_terse: cfg.state_output_terse,
    arg: cli.arg,
    ...(indent === undefined ? {} : { output_indent: indent }),
  };
  const file = typeof o.outputFile === "string" ? o.outputFile : undefined;
  if (file && !o.outputFileAppend && existsSync(file)) writeFileSync(file, "");
  const outputter = (out?: string) => chooseOutputter(out, { output, static: cli.static, fun: cli.fun });
  return {
    output,
    opts,
    outputter,
    show(data, out, extra = {}) {
      const text = render(outputter(out), data, { ...opts, ...extra });
      if (file) {
        if (text) appendFileSync(file, text + "\n");
      } else if (text) process.stdout.write(text + "\n");
    },
  };
}

/**
 * How salt-run prints a runner's return (Salt's print_async_event and salt/cli/run.py): a return naming its
 * outputter is printed with it, the data alone when the return is exactly {data, outputter}, else the whole
 * return (state.orchestrate's {data, outputter, retcode}, which the highstate outputter unwraps); a numeric
 * retcode in the return (or in its data) is the exit code.
 */
export function runnerOutput(ret: unknown): { data: unknown; out?: string; retcode: number } {
  if (!ret || typeof ret !== "object" || Array.isArray(ret) || Buffer.isBuffer(ret)) return { data: ret, retcode: 0 };
  const m = ret as Record<string, unknown>;
  const out = typeof m.outputter === "string" && m.outputter ? m.outputter : undefined;
  const exact = out !== undefined && Object.keys(m).sort().join(",") === "data,outputter";
  const inner = m.data && typeof m.data === "object" && !Array.isArray(m.data) ? (m.data as Record<string, unknown>).retcode : undefined;
  const rc = "retcode" in m ? m.retcode : inner;
  return { data: exact ? m.data : ret, out, retcode: typeof rc === "number" && Number.isInteger(rc) ? rc : 0 };
}
