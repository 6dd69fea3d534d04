#!/usr/bin/env node
// `npm run cluster:demo`: three brine masters (127.0.0.11-13, standard ports, shared cluster_pki_dir and
// cachedir) behind a real HAProxy on 127.0.0.1:4505/4506, and a swarm of minions that know only the balancer.
// Prints what to try, runs until Ctrl-C, then stops everything (the files stay in the demo directory).
//
//   npm run cluster:demo -- [--minions N] [--dir DIR] [--interval S]
import { spawn } from "node:child_process";
import { existsSync, readdirSync, rmSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    minions: { type: "string", default: "200" },
    dir: { type: "string", default: "var/cluster-demo" },
    interval: { type: "string", default: "20" },
  },
});
const dist = new URL("../dist/", import.meta.url);
if (!existsSync(new URL("tools/local-cluster.js", dist))) {
  console.error("dist/ is missing: run `npm run build` first (npm run cluster:demo does)");
  process.exit(1);
}
const { ClusterHarness, skipReason } = await import(new URL("tools/local-cluster.js", dist).href);

const LB = "127.0.0.1";
const HOSTS = ["127.0.0.11", "127.0.0.12", "127.0.0.13"];
const why = await skipReason(LB, HOSTS);
if (why) {
  console.error(`cannot run the demo here: ${why}`);
  process.exit(1);
}
const root = path.resolve(values.dir);
rmSync(root, { recursive: true, force: true });
console.log(`starting 3 masters and HAProxy under ${root} ...`);
const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, root, clusterId: "brine-demo", extra: { brine_cluster_unhealthy_after_ms: 2000 } });
const leader = await h.waitLeader([0, 1, 2], 3, 60_000);

const cache = path.join(h.shared, "cache");
const rootKey = readdirSync(cache).find((f) => /^\..+_key$/.test(f));
const cli = (name) => `node ${path.relative(process.cwd(), new URL(`src/cli/${name}.js`, dist).pathname)}`;
const swarmArgs = [
  new URL("tools/swarm/cli.js", dist).pathname,
  "steady",
  "--master", LB,
  "--minions", values.minions,
  "--root-key", path.join(cache, rootKey),
  "--interval", values.interval,
  "--duration", "86400",
  "--accept-wait", "1",
  "--id-prefix", "demo-",
];
const swarm = spawn(process.execPath, swarmArgs, { stdio: ["ignore", "ignore", "inherit"] });

const conf = (i) => path.relative(process.cwd(), h.masters[i].confDir);
const pid = (i) => h.masters[i].proc?.pid;
console.log(`
The cluster is up: masters m1 (pid ${pid(0)}), m2 (pid ${pid(1)}), m3 (pid ${pid(2)}); Raft leader ${leader}.
HAProxy listens on ${LB}:4505/4506; ${values.minions} swarm minions (demo-*) sign in through it and get a
test.ping job every ${values.interval} s from whichever master HAProxy hands the publish to.

Try (in another shell, from ${process.cwd()}):

  # a job published on m1 reaches the minions of all three masters
  ${cli("salt")} -c ${conf(0)} 'demo-*' test.ping --out txt | wc -l

  # the Raft view on any master: three voters, the leader, unhealthy voters; the ring of three
  ${cli("salt-run")} -c ${conf(1)} cluster.members
  ${cli("salt-run")} -c ${conf(2)} cluster.ring_info

  # minion keys are shared: the same list on every master
  ${cli("salt-key")} -c ${conf(2)} -L | tail -3

  # kill a master: its minions move to the others through HAProxy, a new leader is elected,
  # cluster.members lists it in unhealthy_voters
  kill -9 ${pid(1)}
  ${cli("salt-run")} -c ${conf(0)} cluster.members

  # partition m3 from its peers (brine_cluster_chaos_file): it cannot commit, the others can
  printf 'm1\\nm2\\n' > ${path.relative(process.cwd(), h.masters[2].chaosFile)}; printf 'm3\\n' > ${path.relative(process.cwd(), h.masters[0].chaosFile)}; printf 'm3\\n' > ${path.relative(process.cwd(), h.masters[1].chaosFile)}
  ${cli("salt-run")} -c ${conf(2)} cluster.route_set jobs cluster     # fails: no leader
  ${cli("salt-run")} -c ${conf(0)} cluster.route_set jobs cluster     # committed
  : > ${path.relative(process.cwd(), h.masters[2].chaosFile)}; : > ${path.relative(process.cwd(), h.masters[0].chaosFile)}; : > ${path.relative(process.cwd(), h.masters[1].chaosFile)}   # heal

  # HAProxy's view of the backends
  node -e 'const c=require("net").connect("${h.statsSocket}");c.on("connect",()=>c.write("show stat\\n"));c.pipe(process.stdout)' | cut -d, -f1,2,5,18 | column -ts,

Logs: ${path.relative(process.cwd(), root)}/m*/master.log.  Ctrl-C stops everything.
`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  console.log("\nstopping the swarm, the masters and HAProxy ...");
  swarm.kill("SIGINT");
  await new Promise((r) => (swarm.exitCode !== null ? r() : swarm.once("exit", r)));
  await h.stop(true);
  console.log(`stopped; files kept in ${root}`);
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
swarm.on("exit", (code) => {
  if (!stopping) console.log(`the swarm exited (${code}); the masters keep running until Ctrl-C`);
});
