/**
 * `npm run sim -- [--seeds N] [--first S] [--seed S] [--nodes K] [--steps T] [--membership on|off] [--trace]`
 *
 * Runs N seeds (S, S+1, …) through the simulator, prints each failing seed with the command that replays it,
 * and ends with exactly one line `N seeds, M violations`. Exit status 1 if M > 0.
 */
import { simulate } from "./cluster.js";
import type { SimOptions, SimReport } from "./cluster.js";

export interface CliArgs {
  seeds: number;
  first: number;
  nodes?: number;
  steps?: number;
  membership?: boolean;
  trace: boolean;
}

export function parseArgs(argv: readonly string[]): CliArgs {
  const args: CliArgs = { seeds: 100, first: 1, trace: false };
  const num = (name: string, v: string | undefined): number => {
    const n = Number(v);
    if (v === undefined || !Number.isSafeInteger(n) || n < 0) throw new Error(`${name} needs a non-negative integer`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    switch (a) {
      case "--seeds":
      case "--first":
      case "--nodes":
      case "--steps":
        args[a.slice(2) as "seeds" | "first" | "nodes" | "steps"] = num(a, argv[++i]);
        break;
      case "--seed":
        args.first = num(a, argv[++i]);
        args.seeds = 1;
        break;
      case "--membership": {
        const v = argv[++i];
        if (v !== "on" && v !== "off") throw new Error("--membership takes on|off");
        args.membership = v === "on";
        break;
      }
      case "--trace":
        args.trace = true;
        break;
      default:
        throw new Error(`unknown argument ${a}`);
    }
  }
  return args;
}

/** Runs the seeds; calls `out` for each printed line. Returns the reports of failing seeds. */
export function runSeeds(args: CliArgs, out: (line: string) => void): { reports: SimReport[]; failures: SimReport[] } {
  const reports: SimReport[] = [];
  const failures: SimReport[] = [];
  for (let seed = args.first; seed < args.first + args.seeds; seed++) {
    const opts: SimOptions = { seed };
    if (args.nodes !== undefined) opts.nodes = args.nodes;
    if (args.steps !== undefined) opts.steps = args.steps;
    if (args.membership !== undefined) opts.membership = args.membership;
    if (args.trace) opts.trace = out;
    const r = simulate(opts);
    reports.push(r);
    if (r.violation) {
      failures.push(r);
      const extra = [
        args.nodes !== undefined ? `--nodes ${args.nodes}` : "",
        args.steps !== undefined ? `--steps ${args.steps}` : "",
        args.membership !== undefined ? `--membership ${args.membership ? "on" : "off"}` : "",
      ]
        .filter(Boolean)
        .join(" ");
      out(`FAIL seed ${seed} (nodes=${r.nodes} membership=${r.membership} asyncWrites=${r.asyncWrites}): ${r.violation}`);
      out(`  replay: npm run sim -- --seed ${seed}${extra ? ` ${extra}` : ""} --trace`);
    }
  }
  return { reports, failures };
}

function main(): void {
  let args: CliArgs;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error((e as Error).message);
    process.exit(2);
  }
  const started = process.hrtime.bigint();
  const { reports, failures } = runSeeds(args, (line) => console.log(line));
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const acked = reports.reduce((s, r) => s + r.acked, 0);
  const rests = reports.reduce((s, r) => s + r.rests, 0);
  const reads = reports.reduce((s, r) => s + r.readsOk, 0);
  const ticks = reports.reduce((s, r) => s + r.ticks, 0);
  console.log(`ran ${reports.length} seeds in ${(ms / 1000).toFixed(1)} s: ${ticks} ticks, ${acked} acknowledged writes, ${reads} linearizable reads checked, ${rests} rests`);
  console.log(`${reports.length} seeds, ${failures.length} violations`);
  process.exitCode = failures.length > 0 ? 1 : 0;
}

if (import.meta.url === `file://${process.argv[1]}`) main();
