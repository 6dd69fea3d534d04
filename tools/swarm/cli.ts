/**
 * brine-swarm: simulate N Salt minions against a master (brine or the Python salt-master) and measure it.
 *
 *   npx brine-swarm SCENARIO --master HOST [--ret-port 4506] [--publish-port 4505] --minions N
 *                   [--procs K] [--root-key FILE] [--json FILE] …
 *
 * Exit status: 0 when every minion signed in and every expected return came back; 1 when the run found
 * problems (they are in the report); 2 on bad options or an environment that cannot run the swarm.
 */
import { writeFileSync } from "node:fs";
import { Command, InvalidArgumentError, Option } from "commander";
import { isBrineError } from "../../src/shared/errors.js";
import { DEFAULT_KEY_POOL_DIR } from "../../src/lib/minion/keys.js";
import { formatReport } from "./report.js";
import { runSwarm, SCENARIOS, type Scenario } from "./swarm.js";

function int(name: string, min = 0) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return n;
  };
}

function num(name: string, min = 0) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < min) throw new InvalidArgumentError(`${name} must be a number ≥ ${min}`);
    return n;
  };
}

const program = new Command("brine-swarm")
  .description(
    "Simulate N Salt minions (protocol-exact 3007 v3, or 3006.8 v2) against a salt-master and report sign-in and job figures.\n\n" +
      "Scenarios:\n" +
      "  auth-storm  all minions sign in at once: time to all accepted, auth/s, p50/p99, errors\n" +
      "  ping        then publish test.ping with the master's root key and wait for every return\n" +
      "  steady      then publish a job every --interval seconds for --duration seconds\n" +
      "  churn       then, each --interval, a fraction of the minions disconnect and reconnect; ping after each round",
  )
  .addArgument(new Command().createArgument("<scenario>", "what to run").choices(SCENARIOS))
  .requiredOption("--master <host>", "master address (IP or name)")
  .option("--ret-port <port>", "master request port", int("--ret-port", 1), 4506)
  .option("--publish-port <port>", "publish port (default: the one the master announces in its auth reply)", int("--publish-port", 1))
  .requiredOption("--minions <n>", "how many minions", int("--minions", 1))
  .option("--procs <k>", "worker processes to spread the minions over", int("--procs", 1), 1)
  .option("--root-key <file>", "the master's .root_key file (cachedir/.root_key); needed to publish jobs")
  .option("--user <name>", "the user the root key belongs to (default: from the file name, else root)")
  .option("--json <file>", "write the full report as JSON to FILE (- for stdout)")
  .addOption(new Option("--protocol <p>", "request protocol: v3 (3006.12+/3007.4+) or v2 (3006.8)").choices(["v3", "v2"]).default("v3"))
  .option("--master-pid <pid>", "pid of a local master: report its (and its children's) RSS and CPU", int("--master-pid", 1))
  .option("--key-dir <dir>", "key pool directory (generated once, reused)", DEFAULT_KEY_POOL_DIR)
  .option("--id-prefix <prefix>", "minion ids are PREFIX00000, PREFIX00001, …", "swarm-")
  .option("--target <tgt>", "target for published jobs (default: PREFIX*)")
  .option("--tgt-type <type>", "target type: glob, list, pcre, grain, compound, …", "glob")
  .option("--fun <function>", "function for ping/steady jobs", "test.ping")
  .option("--arg <arg...>", "arguments for the function")
  .option("--count <n>", "ping: how many jobs, one after the other", int("--count", 1), 1)
  .option("--interval <seconds>", "steady/churn: seconds between jobs or rounds", num("--interval", 0.01), 10)
  .option("--duration <seconds>", "steady/churn: seconds to run", num("--duration", 0), 60)
  .option("--churn-fraction <f>", "churn: fraction of the minions cycled per round", num("--churn-fraction", 0), 0.1)
  .option("--timeout <seconds>", "how long to wait for a job's returns", num("--timeout", 0), 30)
  .option("--start-timeout <seconds>", "how long the sign-in storm may take (default max(120, N × 0.04))", num("--start-timeout", 1))
  .option("--startup-delay <seconds>", "random_startup_delay: each minion starts after a random delay up to this (0 = all at once)", num("--startup-delay", 0), 0)
  .option("--accept-wait <seconds>", "acceptance_wait_time: retry interval while the key is pending", num("--accept-wait", 0), 10)
  .option("--accept-wait-max <seconds>", "acceptance_wait_time_max (0 = the wait does not grow; see bench/README.md for how a sign-in is retried)", num("--accept-wait-max", 0), 0)
  .option("--auth-timeout <seconds>", "auth_timeout per sign-in try", num("--auth-timeout", 0.01), 5)
  .option("--auth-tries <n>", "auth_tries", int("--auth-tries", 1), 7)
  .option("--request-timeout <seconds>", "request_channel_timeout", num("--request-timeout", 0.01), 60)
  .option("--reauth-delay <seconds>", "random_reauth_delay: max random wait before re-auth on a new AES key", num("--reauth-delay", 0), 10)
  .option("--recon-default <ms>", "recon_default (SUB reconnect base, ms)", int("--recon-default", 0), 1000)
  .option("--recon-max <ms>", "recon_max (random extra, ms)", int("--recon-max", 0), 10000)
  .option("--source-ips <k>", "connect from k loopback addresses 127.0.0.2… (loopback masters only)", int("--source-ips", 0), 0)
  .option("--cmd-run-output <text>", "what the cmd.run stand-in prints for commands it does not know")
  .option("--no-pub-monitor", "do not watch SUB connections (saves 2 descriptors and 2 sockets per minion)")
  .option("--io-threads <n>", "libzmq I/O threads per worker", int("--io-threads", 1), 1)
  .option("--progress", "force the progress bar (default: only on a terminal)")
  .option("--no-progress", "never show the progress bar")
  .showHelpAfterError();

program.parse();
const o = program.opts();
const scenario = program.processedArgs[0] as Scenario;

const stop = new AbortController();
process.on("SIGINT", () => {
  if (stop.signal.aborted) process.exit(130);
  stop.abort();
  process.stderr.write("\nbrine-swarm: interrupted; stopping the minions and writing the report (Ctrl-C again to quit at once)\n");
});

try {
  const report = await runSwarm({
    scenario,
    master: o.master,
    retPort: o.retPort,
    publishPort: o.publishPort,
    minions: o.minions,
    procs: o.procs,
    rootKeyFile: o.rootKey,
    user: o.user,
    protocol: o.protocol,
    keyDir: o.keyDir,
    idPrefix: o.idPrefix,
    target: o.target,
    tgtType: o.tgtType,
    fun: o.fun,
    arg: o.arg,
    count: o.count,
    intervalS: o.interval,
    durationS: o.duration,
    churnFraction: o.churnFraction,
    jobTimeoutMs: o.timeout * 1000,
    startTimeoutMs: o.startTimeout === undefined ? undefined : o.startTimeout * 1000,
    startupDelayMs: o.startupDelay * 1000,
    acceptanceWaitMs: o.acceptWait * 1000,
    acceptanceWaitMaxMs: o.acceptWaitMax * 1000,
    authTimeoutMs: o.authTimeout * 1000,
    authTries: o.authTries,
    requestTimeoutMs: o.requestTimeout * 1000,
    randomReauthDelayMs: o.reauthDelay * 1000,
    reconDefaultMs: o.reconDefault,
    reconMaxMs: o.reconMax,
    sourceIps: o.sourceIps,
    cmdRunOutput: o.cmdRunOutput,
    pubMonitor: o.pubMonitor,
    ioThreads: o.ioThreads,
    masterPid: o.masterPid,
    progress: o.progress,
    signal: stop.signal,
  });
  const json = JSON.stringify(report, null, 2) + "\n";
  if (o.json === "-") process.stdout.write(json);
  else {
    process.stdout.write(formatReport(report));
    if (o.json) writeFileSync(o.json, json);
  }
  const clean = report.authenticated === report.minions && report.missing_returns === 0 && report.errors === 0;
  process.exit(clean ? 0 : 1);
} catch (e) {
  const msg = isBrineError(e) ? e.message : (e as Error).stack ?? String(e);
  process.stderr.write(`brine-swarm: ${msg}\n`);
  process.exit(2);
}
