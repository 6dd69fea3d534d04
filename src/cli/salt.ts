/**
 * salt: publish a job and print each minion's return as it arrives (Salt's LocalClient + SaltCMD).
 */
import { Command, Option } from "commander";
import { conditionInput } from "../lib/client/args.js";
import { isRegisteredSyndic, LocalClient, type PubReply } from "../lib/client/local-client.js";
import { controlCall } from "../lib/client/control-client.js";
import { eauthKwargs } from "../lib/client/eauth-cli.js";
import { formatResult, OUTPUTTERS, type OutName } from "../lib/output/outputters.js";
import { DEFAULT_CONFIG_DIR, exitWith, loadConfigOrExit, setupCliLogging } from "./common.js";

const program = new Command("salt")
  .usage("[options] '<target>' <function> [arguments]")
  .description("Publish a command to the minions that match a target and print their returns")
  .option("-c, --config-dir <dir>", "directory holding the master config", DEFAULT_CONFIG_DIR)
  .option("-t, --timeout <seconds>", "seconds to wait for returns before asking the minions whether the job is still running")
  .option("--gather-job-timeout <seconds>", "seconds to wait for the find_job replies")
  .option("-E, --pcre", "the target is a Perl-compatible regular expression")
  .option("-L, --list", "the target is a comma-separated list of minion ids")
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
  .option("--out <outputter>", `output format: ${OUTPUTTERS.join(", ")}`, "nested")
  .option("--return <returner>", "returner to use for the job's returns", "")
  .option("-l, --log-level <level>", "console log level", "warning")
  .option("-a, --auth <eauth>", "authenticate with this external_auth backend (asks for the username and password); also --eauth, --external-auth")
  .addOption(new Option("--eauth <eauth>").hideHelp())
  .addOption(new Option("--external-auth <eauth>").hideHelp())
  .option("-T, --make-token", "with -a: trade the credentials for a token, kept in token_file (~/.salt_token) for later commands")
  .option("--username <name>", "the eauth username (else asked)")
  .option("--password <password>", "the eauth password (else asked, without echo)")
  .argument("<target>")
  .argument("<function>")
  .argument("[arguments...]")
  .allowExcessArguments(true);
program.parse();
const o = program.opts();
const [tgtRaw, fun, words] = program.processedArgs as [string, string, string[]];
setupCliLogging(o.logLevel);
const out = (OUTPUTTERS as readonly string[]).includes(o.out) ? (o.out as OutName) : "nested";

const tgtType = o.list
  ? "list"
  : o.pcre
    ? "pcre"
    : o.grain
      ? "grain"
      : o.grainPcre
        ? "grain_pcre"
        : o.pillar
          ? "pillar"
          : o.pillarPcre
            ? "pillar_pcre"
            : o.ipcidr
              ? "ipcidr"
              : o.compound
                ? "compound"
                : o.nodegroup
                  ? "nodegroup"
                  : "glob";
const cfg = loadConfigOrExit(o.configDir);
const timeoutS = o.timeout !== undefined ? Number(o.timeout) : cfg.timeout;
const gatherS = o.gatherJobTimeout !== undefined ? Number(o.gatherJobTimeout) : cfg.gather_job_timeout;
// -L a,b goes out as a list, as Salt's CLI sends it
const tgt: string | string[] = tgtType === "list" ? tgtRaw.split(",").filter(Boolean) : tgtRaw;
const funs = fun.includes(",") ? fun.split(",") : fun;
const arg = conditionInput(words ?? []);
const client = new LocalClient(cfg);
const kwargs: Record<string, unknown> = { show_timeout: true, show_jid: Boolean(o.showJid), delimiter: o.delimiter };
/** What Salt's CLI prints (on stdout, exit 1) when the master refuses the credentials or the rights. */
const AUTH_REFUSALS = new Set(["Authentication error occurred.", "Authorization error occurred."]);

function printBlock(id: string, ret: unknown): void {
  const s = formatResult(out, { [id]: ret });
  if (s) process.stdout.write(s + "\n");
}

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

async function main(): Promise<number> {
  const creds = await eauthKwargs(cfg, { eauth: o.auth ?? o.eauth ?? o.externalAuth, makeToken: o.makeToken, username: o.username, password: o.password }, client.rootKey() !== "", (load) => client.clearRequest(load));
  if (!creds) {
    process.stderr.write("ERROR: Authentication failed\n");
    return 2;
  }
  Object.assign(kwargs, creds);
  if (o.async) {
    const r = await client.pub({ tgt, fun: funs, arg, tgtType, ret: o.return, kwargs, timeoutS });
    const err = pubError(r);
    if (err && AUTH_REFUSALS.has(err)) {
      process.stdout.write(`${err}\n`);
      return 1;
    }
    if (err || !r.jid) {
      process.stderr.write(`ERROR: ${err ?? "No minions matched the target. No command was sent, no jid was assigned."}\n`);
      return 2;
    }
    process.stdout.write(`Executed command with job ID: ${r.jid}\n`);
    return 0;
  }
  let exit = 0;
  let jid: string | undefined;
  let failure: string | undefined;
  const missing: string[] = [];
  /** minions a syndic reported: this master cannot tell whether they are connected below it */
  const belowSyndics = new Set<string>();
  let answered = 0;
  for await (const r of client.cmdIter(
    { tgt, fun: funs, arg, tgtType, ret: o.return, kwargs, timeoutS },
    {
      gatherJobTimeoutS: gatherS,
      onPub: (p) => {
        jid = p.jid ?? undefined;
        failure = pubError(p);
        // a master of masters publishes anyway: minions below its syndics may match
        if (!failure && (!p.minions || p.minions.length === 0) && !cfg.order_masters) failure = "No minions matched the target. No command was sent, no jid was assigned.";
        if (jid && (o.verbose || o.showJid)) {
          if (o.verbose) process.stdout.write(`Executing job with jid ${jid}\n-------------------------------------------\n\n`);
          else process.stdout.write(`jid: ${jid}\n`);
        }
      },
    },
  )) {
    if ("missing" in r) {
      // a syndic is not a minion that failed to answer (Salt's syndic_dir check)
      if (cfg.order_masters && isRegisteredSyndic(cfg, r.id)) continue;
      missing.push(r.id);
      if (r.syndic !== undefined) belowSyndics.add(r.id);
      continue;
    }
    answered++;
    const data = r.data;
    printBlock(r.id, data.return);
    if (typeof data.retcode === "number" && data.retcode !== 0) exit = 1;
    else if (data.success === false) exit = 1;
  }
  if (failure && AUTH_REFUSALS.has(failure)) {
    process.stdout.write(`${failure}\n`);
    return 1;
  }
  if (failure) {
    // Salt's master says "could not resolve minions"; its CLI tells the operator nothing was sent.
    const noMatch = failure.startsWith("No minions") || failure.startsWith("Master could not resolve minions");
    process.stderr.write(noMatch ? "No minions matched the target. No command was sent, no jid was assigned.\n" : `ERROR: ${failure}\n`);
    return 2;
  }
  if (cfg.order_masters && jid && answered === 0 && missing.length === 0) {
    process.stderr.write(`No minions answered: none matched here and no syndic reported a match within syndic_wait (${cfg.syndic_wait} s). The job ${jid} was published.\n`);
    return 2;
  }
  if (missing.length) {
    const present = await notConnected();
    for (const id of missing) {
      const text =
        present && present.size > 0 && !present.has(id) && !belowSyndics.has(id)
          ? "Minion did not return. [Not connected]"
          : `Minion did not return. [No response]\nThe minions may not have all finished running and any remaining minions will return upon completion. To look up the return data for this job later, run the following command:\n\nsalt-run jobs.lookup_jid ${jid}`;
      printBlock(id, text);
    }
    exit = 1;
  }
  if (exit !== 0) process.stderr.write("ERROR: Minions returned with non-zero exit code\n");
  return exit;
}

main().then(
  (code) => exitWith(code),
  (e: Error) => {
    process.stderr.write(`Salt request timed out. The master is not responding. You may need to run your command with \`--async\` in order to bypass the congested event bus. (${e.message})\n`);
    return exitWith(2);
  },
);
