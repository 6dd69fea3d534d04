/**
 * Issue 13's bench: test.ping latency of 100 ordinary minions (brine-swarm, forked processes) while one
 * minion keeps four catastrophic `_mine_get` patterns in flight (`(a+)+$`, as pcre and as E@ in a compound,
 * against an accepted id of 28 a's and a '!'), against the same minions' latency with nothing else going on.
 * One swarm run of 2×ROUNDS ping jobs: the attack starts with job ROUNDS+1. Target: the attacked median
 * within 10 % of the quiet one (before the linear-time engine, the quiet lane stalled ~13 s per pattern).
 * The master is its own process with the default configuration (worker_threads 5).
 */
import os from "node:os";
import path from "node:path";
import { runSwarm } from "../tools/swarm/swarm.js";
import { TestMinion } from "../src/lib/minion/test-minion.js";
import { keyPool } from "../src/lib/minion/keys.js";
import { RawClient } from "../src/lib/minion/raw-client.js";
import { startBrineMaster } from "./swarm.js";
import type { BenchOptions, BenchRow } from "./types.js";

const ROUNDS = 10;
const ATTACKS = [
  { tgt: "(a+)+$", tgt_type: "pcre" },
  { tgt: "(a+)+$", tgt_type: "pcre" },
  { tgt: "E@(a+)+$", tgt_type: "compound" },
  { tgt: "(a|aa)+$", tgt_type: "pcre" },
];

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : NaN;
};

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const n = opts.full ? 500 : 100;
  const master = await startBrineMaster();
  const keys = (await keyPool(2, { dir: path.join(os.tmpdir(), "brine-bench-attacker-keys") })).keys;
  const mk = (id: string, i: number) => new TestMinion({ id, master: "127.0.0.1", retPort: master.retPort, keys: keys[i]!, acceptanceWaitMs: 200, randomReauthDelayMs: 0, requestTimeoutMs: 120_000 });
  const evil = mk("bench-evil", 0);
  const victim = mk(`${"a".repeat(28)}!`, 1);
  const raws = ATTACKS.map(() => new RawClient({ host: "127.0.0.1", port: master.retPort, timeoutMs: 120_000 }));
  let attacking = false;
  let attacksDone = 0;
  const loops: Promise<void>[] = [];
  try {
    await evil.start();
    await victim.start();
    const attack = async (i: number) => {
      while (attacking) {
        await raws[i]!.aes({ cmd: "_mine_get", id: "bench-evil", fun: "test.ping", ...ATTACKS[i] }, { key: evil.creds!.session!, id: "bench-evil", keys: keys[0], timeoutMs: 120_000 });
        attacksDone++;
      }
    };
    const report = await runSwarm(
      {
        scenario: "ping",
        master: "127.0.0.1",
        retPort: master.retPort,
        minions: n,
        procs: 2,
        rootKeyFile: master.rootKeyFile,
        masterPid: master.pid,
        idPrefix: "bench-pat-",
        acceptanceWaitMs: 1000,
        randomReauthDelayMs: 0,
        jobTimeoutMs: 60_000,
        count: 2 * ROUNDS,
        progress: false,
      },
      {
        onPhase: (phase) => {
          if (phase === `ping ${ROUNDS + 1}` && !attacking) {
            attacking = true;
            for (let i = 0; i < ATTACKS.length; i++) loops.push(attack(i));
          }
        },
      },
    );
    attacking = false;
    await Promise.all(loops);
    const quiet = report.jobs.slice(0, ROUNDS);
    const attacked = report.jobs.slice(ROUNDS);
    const q50 = median(quiet.map((j) => j.return_p50_ms ?? NaN));
    const a50 = median(attacked.map((j) => j.return_p50_ms ?? NaN));
    const qLast = median(quiet.map((j) => j.last_return_ms ?? NaN));
    const aLast = median(attacked.map((j) => j.last_return_ms ?? NaN));
    const note = `${n} minions, ${ROUNDS}+${ROUNDS} jobs, ${attacksDone} catastrophic _mine_get answered during the attacked jobs, ${report.errors} errors`;
    return [
      { figure: `test.ping p50, ${n} minions, quiet (median of ${ROUNDS} jobs)`, value: q50, unit: "ms", better: "lower", note },
      { figure: `test.ping p50, ${n} minions, 4 catastrophic patterns in flight`, value: a50, unit: "ms", target: q50 * 1.1, better: "lower" },
      { figure: `test.ping last return, ${n} minions, quiet`, value: qLast, unit: "ms", better: "lower" },
      { figure: `test.ping last return, ${n} minions, 4 catastrophic patterns in flight`, value: aLast, unit: "ms", target: qLast * 1.1, better: "lower" },
      { figure: "returns under attack", value: attacked.reduce((s, j) => s + j.returned, 0), unit: "returns", target: attacked.reduce((s, j) => s + j.expected, 0), better: "higher" },
    ];
  } finally {
    attacking = false;
    for (const r of raws) r.close();
    await evil.stop();
    await victim.stop();
    await master.stop();
  }
}
