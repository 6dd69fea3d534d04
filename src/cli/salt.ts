/**
 * salt: publish a job and print each minion's return as it arrives (Salt 3007's salt/cli/salt.py SaltCMD with
 * LocalClient): targets, compound functions with --args-separator, --async, -v/--show-jid, --hide-timeout,
 * --subset, batch mode (-b, --batch-wait, --failhard, --static, --batch-safe-limit/--batch-safe-size and
 * the batch_safe_* options; src/lib/client/batch.ts), the returners' --return/--return_config/--return_kwargs and
 * --metadata (sent in the publish as Salt sends them; the returners run on the minions), --summary,
 * --preview-target, the output options (src/lib/output/display.ts) and the outputter each return names (state
 * functions: highstate), eauth, --version and --versions-report.
 */
import { readFileSync } from "node:fs";
import { Command, Option } from "commander";
import { conditionInput, yamlifyArg } from "../lib/client/args.js";
import { isRegisteredSyndic, LocalClient, type JobReturn, type PubOptions, type PubReply } from "../lib/client/local-client.js";
import { controlCall } from "../lib/client/control-client.js";
import { eauthKwargs } from "../lib/client/eauth-cli.js";
import { BatchPlan, batchSize, invalidBatchText, partRetcode, runBatch, type BatchPart, type SubJobReturn } from "../lib/client/batch.js";
import { versionLine, versionsReport } from "../lib/client/version.js";
import { addOutputOptions, makeDisplay, type Display } from "../lib/output/display.js";
import { DEFAULT_CONFIG_DIR, exitWith, listTarget, loadConfigOrExit, setupCliLogging, targetTypeOf } from "./common.js";

const program = new Command("salt")
  .usage("[options] '<target>' <function> [arguments]")
  .description("Publish a command to the minions that match a target and print their returns")
  .option("-c, --config-dir <dir>", "directory holding the master config", DEFAULT_CONFIG_DIR)
  .option("-t, --timeout <seconds>", "seconds to wait for returns before asking the minions whether the job is still running")
  .option("--gather-job-timeout <seconds>", "seconds to wait for the find_job replies")
  .option("-E, --pcre", "the target is a Perl-compatible regular expression")
  .option("-L, --list", "the target is a comma- or space-separated list of minion ids")
  .option("-G, --grain", "the target is a grain match (key:glob)")
  .option("-P, --grain-pcre", "the target is a grain match with a regular expression")
  .option("-I, --pillar", "the target is a pillar match (key:glob)")
  .option("-J, --pillar-pcre", "the target is a pillar match with a regular expression")
  .option("-S, --ipcidr", "the target is an IP address or CIDR subnet")
  .option("-C, --compound", "the target is a compound expression")
  .option("-N, --nodegroup", "the target is a nodegroup name")
  .option("--delimiter <char>", "delimiter for grain and pillar targets", ":")
  .option("--async", "publish and print the jid without waiting")
  .option("--show-jid", "print the jid of the job")
  .option("-v, --verbose", "print the jid and what happens to the job")
  .option("--hide-timeout", "do not show the minions that did not return")
  .option("-s, --static", "print the returns together once all minions returned")
  .option("-b, --batch <size>", "run in batches of this many minions (N) or this share of them (N%); also --batch-size")
  .addOption(new Option("--batch-size <size>").hideHelp())
  .option("--batch-wait <seconds>", "in batch mode, keep a finished minion's slot busy this long before the next minion takes it")
  .option("--batch-safe-limit <n>", "switch to batch mode when the target matches at least this many minions (default: batch_safe_limit)")
  .option("--batch-safe-size <size>", "the batch size of --batch-safe-limit (default: batch_safe_size, 8)")
  .option("--failhard", "stop a batch run at the first return with a non-zero retcode")
  .option("--subset <n>", "run on this many randomly chosen targeted minions that have the function")
  .option("--args-separator <sep>", "separates the argument lists of a compound command (fun1,fun2 a , b)", ",")
  .option("--return <returner>", "also send the returns to these returners (comma-separated), on the minions", "")
  .option("--return_config <name>", "the returners' alternative configuration name")
  .option("--return_kwargs <yaml>", "options for the returners, a YAML mapping")
  .option("--metadata <yaml>", "metadata for the job, stored with it")
  .option("--module-executors <yaml>", "the executors the minions run the function with, a YAML list (e.g. [sudo, direct_call])")
  .option("--executor-opts <yaml>", "options for those executors, a YAML mapping")
  .option("-d, --doc", "print the documentation of the functions from the minions (sys.doc): salt -d, salt '*' -d MODULE[.FUNCTION]; also --documentation")
  .addOption(new Option("--documentation").hideHelp())
  .option("--config-dump", "print the master configuration as brine reads it, in YAML")
  .option("--no-parse <names>", "comma-separated keyword arguments whose values are passed as text, not YAML-parsed")
  .option("--summary", "print a summary of the returns at the end (as cli_summary)")
  .option("--output-diff", "highstate: show only states that failed or changed")
  .option("--preview-target", "print the minions the target matches; publish nothing")
  .option("-l, --log-level <level>", "console log level", "warning")
  .option("-a, --auth <eauth>", "authenticate with this external_auth backend (asks for the username and password); also --eauth, --external-auth")
  .addOption(new Option("--eauth <eauth>").hideHelp())
  .addOption(new Option("--external-auth <eauth>").hideHelp())
  .option("-T, --make-token", "with -a: trade the credentials for a token, kept in token_file (~/.salt_token) for later commands")
  .option("--username <name>", "the eauth username (else asked)")
  .option("--password <password>", "the eauth password (else asked, without echo)")
  .option("--args-stdin", "read more options and arguments from stdin, one per line, after those on the command line")
  .option("--version", "print brine's version and the Salt version it speaks")
  .option("-V, --versions-report", "print the versions of brine, Node.js, its libraries and the system")
  .argument("[target]")
  .argument("[function]")
  .argument("[arguments...]")
  .allowExcessArguments(true);
addOutputOptions(program);
// Salt's --args-stdin: each line of stdin is one more word of the command line, after the given ones
if (process.argv.includes("--args-stdin")) {
  const lines = readFileSync(0, "utf8").split("\n").map((l) => l.replace(/\r$/, ""));
  if (lines[lines.length - 1] === "") lines.pop();
  process.argv.push(...lines);
}
program.parse();
const o = program.opts();
if (o.version) {
  process.stdout.write(versionLine("salt") + "\n");
  await exitWith(0);
}
if (o.versionsReport) {
  process.stdout.write(versionsReport() + "\n");
  await exitWith(0);
}
let [tgtRaw, funRaw, words] = program.processedArgs as [string | undefined, string | undefined, string[]];
if (o.configDump) {
  const { render } = await import("../lib/output/outputters.js");
  process.stdout.write(render("yaml", loadConfigOrExit(o.configDir), { color: false }) + "\n");
  await exitWith(0);
}
// -d: Salt's --doc, the words become TARGET sys.doc [MODULE] (target * when none is given)
if (o.doc || o.documentation) {
  const a = [tgtRaw, funRaw, ...(words ?? [])].filter((w): w is string => w !== undefined);
  if (!a.length) a.push("*");
  if (a.length < 2) a.splice(1, 0, "sys.doc");
  if (a[1] !== "sys.doc") a.splice(1, 0, "sys.doc");
  if (a.length > 3) {
    process.stderr.write("salt: error: You can only get documentation for one method at one time.\n");
    await exitWith(2);
  }
  [tgtRaw, funRaw, ...words] = a;
}
if (tgtRaw === undefined || (funRaw === undefined && !o.previewTarget)) {
  process.stdout.write(program.helpInformation());
  process.stderr.write(tgtRaw === undefined ? "\nCannot execute command without defining a target.\n\n" : "\nIncomplete options passed.\n\n");
  await exitWith(42);
}
setupCliLogging(o.logLevel);

const TARGET_FLAGS: [string, string][] = [
  ["list", "list"],
  ["pcre", "pcre"],
  ["grain", "grain"],
  ["grainPcre", "grain_pcre"],
  ["pillar", "pillar"],
  ["pillarPcre", "pillar_pcre"],
  ["ipcidr", "ipcidr"],
  ["compound", "compound"],
  ["nodegroup", "nodegroup"],
];
const tgtType = targetTypeOf("salt", o, TARGET_FLAGS) ?? "glob";
const cfg = loadConfigOrExit(o.configDir);
const timeoutS = o.timeout !== undefined && Number(o.timeout) > 0 ? Number(o.timeout) : cfg.timeout;
const gatherS = o.gatherJobTimeout !== undefined ? Number(o.gatherJobTimeout) : cfg.gather_job_timeout;
// -L a,b (or "a b") goes out as a list, as Salt's CLI sends it
const tgt: string | string[] = tgtType === "list" ? listTarget(tgtRaw!) : tgtRaw!;

/** Salt's compound command parsing: fun1,fun2 with one argument list each, split by --args-separator. */
function parseFunArgs(fun: string, args: string[], sep: string, noParse: string[]): { fun: string | string[]; arg: unknown[] } | { error: string } {
  if (!fun.includes(",")) return { fun, arg: conditionInput(args, noParse) };
  const funs = fun.split(",");
  const lists: string[][] = [[]];
  if (args.filter((a) => a === sep).length === funs.length - 1) {
    for (const a of args) {
      if (a === sep) lists.push([]);
      else lists[lists.length - 1]!.push(a);
    }
  } else {
    for (const a of args) {
      if (a.includes(sep)) {
        const subs = a.split(sep);
        subs.forEach((s, i) => {
          if (s) lists[lists.length - 1]!.push(s);
          if (i !== subs.length - 1) lists.push([]);
        });
      } else lists[lists.length - 1]!.push(a);
    }
    if (funs.length > lists.length) return { error: "Cannot execute compound command without defining all arguments." };
    if (funs.length < lists.length) return { error: "Cannot execute compound command with more arguments than commands." };
  }
  return { fun: funs, arg: lists.map((l) => conditionInput(l, noParse)) };
}

const parsed = parseFunArgs(funRaw ?? "", words ?? [], o.argsSeparator, typeof o.parse === "string" ? o.parse.split(",").filter(Boolean) : []);
if ("error" in parsed) {
  process.stderr.write(parsed.error + "\n");
  await exitWith(42);
}
const { fun: funs, arg } = parsed as { fun: string | string[]; arg: unknown[] };
const display: Display = makeDisplay(o, cfg, { fun: funs, static: Boolean(o.static), arg });
const client = new LocalClient(cfg);
/** What Salt's CLI prints (on stdout, exit 1) when the master refuses the credentials or the rights. */
const AUTH_REFUSALS = new Set(["Authentication error occurred.", "Authorization error occurred."]);
const NO_MATCH = "No minions matched the target. No command was sent, no jid was assigned.";

function pubError(r: PubReply): string | undefined {
  if (!r.error) return undefined;
  if (typeof r.error === "object" && r.error && "message" in r.error) {
    const e = r.error as { name?: string; message?: string };
    return e.name === "AuthenticationError" ? "Authentication error occurred." : e.message;
  }
  return String(r.error);
}

async function notConnected(): Promise<Set<string> | undefined> {
  try {
    const r = await controlCall(cfg.sock_dir, { op: "run", fun: "manage.present", arg: [], kwarg: {} });
    return r.type === "return" && Array.isArray(r.ret) ? new Set(r.ret as string[]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The text Salt shows for a minion that did not return: "[Not connected]" when its master did not see it
 * connected when it published the job (`whenPublished`), or, for this master's own minions, when this master
 * does not see it connected now (Salt's check); else "[No response]". This master's presence says nothing of a
 * minion below a syndic (`belowSyndic`).
 */
function missingText(id: string, jid: string | undefined, present: Set<string> | undefined, belowSyndic: boolean, whenPublished: boolean): string {
  const notConnected = whenPublished || (!belowSyndic && present !== undefined && present.size > 0 && !present.has(id));
  return notConnected
    ? "Minion did not return. [Not connected]"
    : `Minion did not return. [No response]\nThe minions may not have all finished running and any remaining minions will return upon completion. To look up the return data for this job later, run the following command:\n\nsalt-run jobs.lookup_jid ${jid}`;
}

/** A return event as the local client yields it to the batch (get_iter_returns: ret, out, retcode, jid). */
function partOf(data: Record<string, unknown>): BatchPart {
  const p: BatchPart = { ret: data.return };
  if ("out" in data && typeof data.out === "string") p.out = data.out;
  if ("retcode" in data) p.retcode = data.retcode;
  if (typeof data.jid === "string") p.jid = data.jid;
  return p;
}

function printSummary(rets: Map<string, { ret: unknown; retcode: number }>): void {
  let returned = 0;
  let notReturned = 0;
  const notConn: string[] = [];
  const noResp: string[] = [];
  const failed: string[] = [];
  for (const [id, r] of rets) {
    if (typeof r.ret === "string" && r.ret.startsWith("Minion did not return")) {
      if (r.ret.includes("Not connected")) notConn.push(id);
      else if (r.ret.includes("No response")) noResp.push(id);
      notReturned++;
    } else {
      returned++;
      if (r.retcode) failed.push(id);
    }
  }
  const lines = [
    "\n",
    "-------------------------------------------",
    "Summary",
    "-------------------------------------------",
    `# of minions targeted: ${returned + notReturned}`,
    `# of minions returned: ${returned}`,
    `# of minions that did not return: ${notReturned}`,
    `# of minions with errors: ${failed.length}`,
  ];
  if (o.verbose) {
    if (notConn.length) lines.push(`Minions not connected: ${notConn.join(" ")}`);
    if (noResp.length) lines.push(`Minions not responding: ${noResp.join(" ")}`);
    if (failed.length) lines.push(`Minions with failures: ${failed.join(" ")}`);
  }
  lines.push("-------------------------------------------");
  process.stdout.write(lines.join("\n") + "\n");
}

/** Salt's _print_docs: each function's docstring once (the first minion's that has one), sorted by name. */
function printDocs(rets: Map<string, { ret: unknown }>): number {
  if (rets.size === 0) {
    process.stderr.write("No minions found to gather docs from\n");
    return 2;
  }
  const docs = new Map<string, unknown>();
  for (const { ret } of rets.values()) {
    if (typeof ret === "string" && (ret.startsWith("Minion did not return") || ret === "VALUE_TRIMMED")) continue;
    if (!ret || typeof ret !== "object" || Array.isArray(ret)) continue;
    for (const [fn, doc] of Object.entries(ret as Record<string, unknown>)) if (!docs.has(fn) && doc) docs.set(fn, doc);
  }
  for (const fn of [...docs.keys()].sort()) {
    if (display.output) display.show({ [fn]: docs.get(fn) }, "nested");
    else process.stdout.write(`${fn}:\n${String(docs.get(fn))}\n\n`);
  }
  return 0;
}

/** Batch mode (and --static), as salt/cli/batch.py runs it; returns the exit code. */
async function batchMode(creds: Record<string, unknown>, batch: string | undefined): Promise<number> {
  const quiet = Boolean(o.static);
  const size = batch ?? (quiet ? "100%" : "");
  // 1. the minions that answer a ping of the target
  const up: string[] = [];
  let targeted: string[] = [];
  let failure: string | undefined;
  for await (const r of client.cmdIter(
    { tgt, fun: "test.ping", arg: [], tgtType, kwargs: { gather_job_timeout: gatherS, yield_pub_data: true, ...creds }, timeoutS },
    {
      gatherJobTimeoutS: gatherS,
      onPub: (p) => {
        failure = pubError(p);
        targeted = p.minions ?? [];
      },
    },
  )) {
    if (!("missing" in r) && r.data.failed !== true) up.push(r.id);
  }
  if (failure && AUTH_REFUSALS.has(failure)) {
    process.stdout.write(`${failure}\n`);
    return 1;
  }
  if (targeted.length === 0) {
    process.stdout.write(`${NO_MATCH}\n`);
    if (!quiet) process.stdout.write("No minions matched the target.\n");
  }
  const down = targeted.filter((m) => !up.includes(m));
  const bnum = batchSize(size, up.length);
  if (bnum === undefined && !quiet) process.stdout.write(invalidBatchText(size) + "\n");
  if (up.length === 0) {
    if (quiet) {
      process.stderr.write("ERROR: No return received\n");
      return 2;
    }
    return 0;
  }
  // Salt fails on a missing or zero size here (a traceback, or a loop that never ends); brine stops
  if (bnum === undefined || bnum < 1) {
    if (bnum !== undefined && !quiet) process.stdout.write(invalidBatchText(size) + "\n");
    return 2;
  }
  // Salt takes them in the order of a Python set (arbitrary); brine in id order
  const plan = new BatchPlan([...up].sort(), bnum, Number(o.batchWait ?? 0) * 1000, Boolean(o.failhard), quiet);
  if (!quiet) for (const e of BatchPlan.downText(down)) if (e.type === "print") process.stdout.write(e.text + "\n");
  await runBatch(plan, {
    now: () => Date.now(),
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
    publish: (minions) =>
      (async function* (): AsyncGenerator<SubJobReturn> {
        const it = client.cmdIter({ tgt: minions, tgtType: "list", fun: funs, arg, ret: o.return, kwargs: { raw: false, gather_job_timeout: gatherS, ...creds }, timeoutS }, { gatherJobTimeoutS: gatherS });
        for await (const r of it) yield "missing" in r ? { id: r.id, missing: true } : { id: r.id, part: partOf(r.data) };
      })(),
    effect: (e) => {
      if (e.type === "print") process.stdout.write(e.text + "\n");
      else if (e.type === "show") {
        if (!quiet) display.show(e.data, e.out);
      } else process.stderr.write(`[ERROR   ] Minion ${e.id} returned with non-zero exit code. Batch run stopped due to failhard\n`);
    },
  });
  if (quiet) {
    const ret = plan.returns();
    display.show(ret, "");
    if (Object.keys(ret).length === 0) {
      process.stderr.write("ERROR: No return received\n");
      return 2;
    }
    return 0;
  }
  return plan.retcode;
}

/** --subset: ask the targeted minions for their functions, run on N random ones that have it (cmd_subset). */
async function subsetTargets(n: number, base: PubOptions): Promise<string[]> {
  const have: [string, unknown][] = [];
  for await (const r of client.cmdIter({ ...base, fun: "sys.list_functions", arg: [] }, { gatherJobTimeoutS: gatherS })) {
    if (!("missing" in r)) have.push([r.id, r.data.return]);
  }
  for (let i = have.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [have[i], have[j]] = [have[j]!, have[i]!];
  }
  const out: string[] = [];
  for (const [id, fns] of have) {
    if (Array.isArray(fns) && typeof funs === "string" && fns.includes(funs)) out.push(id);
    if (out.length >= n) break;
  }
  return out;
}

async function main(): Promise<number> {
  if (o.previewTarget) {
    display.show(await client.gatherMinions(tgt, tgtType), "");
    return 0;
  }
  const creds = await eauthKwargs(cfg, { eauth: o.auth ?? o.eauth ?? o.externalAuth, makeToken: o.makeToken, username: o.username, password: o.password }, client.rootKey() !== "", (load) => client.clearRequest(load));
  if (!creds) {
    process.stderr.write("ERROR: Authentication failed\n");
    return 2;
  }
  const batch = (o.batch ?? o.batchSize) as string | undefined;
  if (batch !== undefined || o.static) return batchMode(creds, batch);
  const safeLimit = Number(o.batchSafeLimit ?? cfg.batch_safe_limit ?? 0);
  if (safeLimit > 1 && (await client.gatherMinions(tgt, tgtType)).length >= safeLimit) {
    process.stdout.write("\nNOTICE: Too many minions targeted, switching to batch execution.\n");
    return batchMode(creds, String(o.batchSafeSize ?? cfg.batch_safe_size ?? 8));
  }
  // the publish's kwargs, in Salt's order
  const kwargs: Record<string, unknown> = { show_timeout: !o.hideTimeout, show_jid: Boolean(o.showJid), delimiter: o.delimiter };
  if (o.return_config) kwargs.ret_config = o.return_config;
  if (o.return_kwargs) kwargs.ret_kwargs = yamlifyArg(o.return_kwargs);
  if (o.moduleExecutors) kwargs.module_executors = yamlifyArg(o.moduleExecutors);
  if (o.executorOpts) kwargs.executor_opts = yamlifyArg(o.executorOpts);
  if (o.metadata) kwargs.metadata = yamlifyArg(o.metadata);
  Object.assign(kwargs, creds);
  let pubTgt: string | string[] = tgt;
  let pubType = tgtType;
  const base: PubOptions = { tgt, fun: funs, arg, tgtType, ret: o.return, kwargs, timeoutS };
  if (o.async) {
    const r = await client.pub(base);
    const err = pubError(r);
    if (err && AUTH_REFUSALS.has(err)) {
      process.stdout.write(`${err}\n`);
      return 1;
    }
    if (err || !r.jid) {
      process.stderr.write(`ERROR: ${err ?? NO_MATCH}\n`);
      return 2;
    }
    process.stdout.write(`Executed command with job ID: ${r.jid}\n`);
    return 0;
  }
  if (o.subset !== undefined) {
    pubTgt = await subsetTargets(Number(o.subset), base);
    pubType = "list";
  }
  let failed = false;
  let jid: string | undefined;
  let failure: string | undefined;
  const missing: string[] = [];
  /** minions a syndic reported: this master cannot tell by itself whether they are connected below it */
  const belowSyndics = new Set<string>();
  /** minions their master did not see connected when it published the job */
  const notConnectedWhenPublished = new Set<string>();
  let answered = 0;
  const seen = new Map<string, { ret: unknown; retcode: number }>();
  const isDoc = funs === "sys.doc";
  const show = (id: string, ret: unknown, out: string | undefined, retcode: number) => {
    seen.set(id, { ret, retcode });
    // sys.doc: the docs of every minion are merged and printed once at the end (Salt's _print_docs)
    if (!isDoc) display.show({ [id]: ret }, out, { _retcode: retcode });
    if (retcode !== 0) failed = true;
  };
  const events: AsyncGenerator<JobReturn> = client.cmdIter(
    { ...base, tgt: pubTgt, tgtType: pubType },
    {
      gatherJobTimeoutS: gatherS,
      onPub: (p) => {
        jid = p.jid ?? undefined;
        failure = pubError(p);
        // a master of masters publishes anyway: minions below its syndics may match
        if (!failure && (!p.minions || p.minions.length === 0) && !cfg.order_masters) failure = NO_MATCH;
        if (jid && o.verbose) {
          const msg = `Executing job with jid ${jid}`;
          process.stdout.write(`${msg}\n${"-".repeat(msg.length)}\n\n`);
        } else if (jid && o.showJid) process.stdout.write(`jid: ${jid}\n`);
      },
    },
  );
  for await (const r of events) {
    if ("missing" in r) {
      // a syndic is not a minion that failed to answer (Salt's syndic_dir check)
      if (cfg.order_masters && isRegisteredSyndic(cfg, r.id)) continue;
      missing.push(r.id);
      if (r.syndic !== undefined) belowSyndics.add(r.id);
      if (r.notConnected) notConnectedWhenPublished.add(r.id);
      continue;
    }
    answered++;
    const data = r.data;
    // Salt's _get_retcode: the return's retcode (a multi-function job's highest); nothing else
    show(r.id, data.return, typeof data.out === "string" ? data.out : undefined, partRetcode(data.retcode));
  }
  if (failure && AUTH_REFUSALS.has(failure)) {
    process.stdout.write(`${failure}\n`);
    return 1;
  }
  if (failure) {
    // Salt's master says "could not resolve minions"; its CLI tells the operator nothing was sent.
    const noMatch = failure.startsWith("No minions") || failure.startsWith("Master could not resolve minions");
    if (noMatch) {
      // Salt's LocalClient prints this; its CLI then has no return to show
      process.stdout.write(`${NO_MATCH}\n`);
      process.stderr.write("ERROR: No return received\n");
    } else process.stderr.write(`ERROR: ${failure}\n`);
    return 2;
  }
  if (cfg.order_masters && jid && answered === 0 && missing.length === 0) {
    process.stderr.write(`No minions answered: none matched here and no syndic reported a match within syndic_wait (${cfg.syndic_wait} s). The job ${jid} was published.\n`);
    return 2;
  }
  if (missing.length && (!o.hideTimeout || o.verbose)) {
    // this master's presence is asked only when one of its own minions is missing and not known to be disconnected
    const present = missing.some((id) => !belowSyndics.has(id) && !notConnectedWhenPublished.has(id)) ? await notConnected() : undefined;
    for (const id of missing) show(id, missingText(id, jid, present, belowSyndics.has(id), notConnectedWhenPublished.has(id)), "no_return", 1);
  }
  if (isDoc) return printDocs(seen);
  if ((o.summary || cfg.cli_summary) && display.output === undefined) printSummary(seen);
  if (failed) {
    process.stderr.write("ERROR: Minions returned with non-zero exit code\n");
    return 1;
  }
  return 0;
}

main().then(
  (code) => exitWith(code),
  (e: Error) => {
    process.stderr.write(`Salt request timed out. The master is not responding. You may need to run your command with \`--async\` in order to bypass the congested event bus. (${e.message})\n`);
    return exitWith(2);
  },
);
