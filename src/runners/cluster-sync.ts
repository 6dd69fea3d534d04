/**
 * `cluster.sync_roots` and `cluster.collect_from_peers` (Salt's signatures, salt-cluster.md §9), answered by the
 * state-sync thread over the port the runner thread is given (src/workers/state-sync/engine.ts): unlike Salt's
 * fire-and-forget they return when every peer has answered, with what each did, keyed by the peer's node id:
 * `{items, bytes, deleted, errors, ms}` (a peer that is not connected or did not answer is listed with its
 * error). `async=True` gives Salt's fire-and-forget answer (the transfers run on; their outcome goes to the
 * master's log and `cachedir/brine-state-sync/status.json`).
 *
 * - sync_roots(roots="both"): every peer pulls this master's `file_roots` and/or `pillar_roots` ("file",
 *   "pillar", "both"; also "file_roots", "pillar_roots"): the files named here replace the peers' where they
 *   differ, files removed here are removed there; files only a peer has stay.
 * - collect_from_peers(channels=(), banks=(jobs/loads, jobs/minions, jobs/endtimes, jobs/nocache)): this master
 *   pulls the named channels (`keys`, `denied_keys`, as Salt allows) and job-cache banks (`jobs/returns` too)
 *   from every peer; bank records this master lacks are added, none is overwritten or removed. The minion banks
 *   (`minions/data`, `minions/mine`) are pulled by the Raft worker, waited for as long as the pull makes progress
 *   (collectMinionBank), bounded by `timeout` (seconds, salt-run's -t) when given.
 */
import type { MessagePort } from "node:worker_threads";
import { BrineError } from "../shared/errors.js";
import { BANKS, KEY_CHANNELS } from "../workers/state-sync/manifest.js";
import { pullTimeoutMs, restartWaitForCallMsMax, type EngineCall, type PeerReport, type RunnerAnswer, type RunnerAsk } from "../workers/state-sync/messages.js";
import { MINION_BANK_NAMES, type MinionAnswer, type MinionBank, type PullReport } from "../shared/minion-placement.js";
import { getLogger } from "../shared/log.js";
import type { RaftClient } from "../workers/raft/client.js";
import { revivePortError } from "../shared/port-calls.js";
import { argOf, type RunnerContext, type RunnerFn } from "./context.js";
import { NOT_CLUSTERED } from "./cluster.js";

/** Salt's default banks for collect_from_peers. */
export const COLLECT_BANKS_DEFAULT = ["jobs/loads", "jobs/minions", "jobs/endtimes", "jobs/nocache"];
/** how long collect_from_peers of a minion bank waits with no master answering anything before it answers, ms */
export const collectStallMs = 60_000;
/** What a runner waits for the state-sync thread beyond a peer's own pull timeout, ms. */
const callMarginMs = 30_000;
/**
 * What a runner waits for its call's answer, ms: a peer's pull, then (the thread ended under it) the wait for the next
 * thread and the same pull asked again (StateSyncLink.runnerCall), and a margin.
 */
const callWaitMsMax = 2 * pullTimeoutMs + restartWaitForCallMsMax + callMarginMs;

const log = getLogger("brine.runner.cluster");
let nextId = 1;

/**
 * A per-peer answer of a call the link asked again of a restarted state-sync thread: each peer's report says
 * `restarted: true` (its counts are the second call's: what the first thread installed before it ended is not in
 * them, and was not fetched again). Any other answer (async's `{peers}`) is returned as it is.
 */
export function markRestarted(v: unknown): unknown {
  if (v === null || typeof v !== "object" || Array.isArray(v) || "peers" in v) return v;
  return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([p, r]) => [p, r !== null && typeof r === "object" ? { ...r, restarted: true } : r]));
}

/**
 * One call to the state-sync thread on a runner port (the main thread's link relays it; a call in flight when the
 * thread ended is asked once of the restarted thread there, and its answer marked, markRestarted); rejects with
 * THREAD_GONE when the link closes first (the master stops).
 */
export function askStateSync(port: MessagePort, call: EngineCall): Promise<unknown> {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      done();
      reject(new BrineError("STATE_SYNC_UNAVAILABLE", `no answer from the state-sync thread within ${callWaitMsMax / 1000} s`));
    }, callWaitMsMax);
    const on = (m: RunnerAnswer) => {
      if (m?.id !== id) return;
      done();
      if (m.k === "err") reject(revivePortError(m, "STATE_SYNC_FAILED"));
      else resolve(m.again ? markRestarted(m.v) : m.v);
    };
    // the link closed (the master is stopping): this call's answer will not come
    const closed = () => {
      done();
      reject(new BrineError("THREAD_GONE", "the master is stopping; what the state-sync thread installed stays"));
    };
    const done = () => {
      clearTimeout(t);
      port.off("message", on);
      port.off("close", closed);
    };
    port.on("message", on);
    port.once("close", closed);
    port.postMessage({ k: "call", id, call } satisfies RunnerAsk);
  });
}

/** A list argument as salt-run gives it: a list, a comma-separated string, or nothing. */
function listArg(v: unknown, name: string): string[] {
  if (v === undefined || v === null || v === "") return [];
  if (typeof v === "string") return v.split(",").map((x) => x.trim()).filter(Boolean);
  if (Array.isArray(v) && v.every((x) => typeof x === "string")) return v as string[];
  throw new BrineError("STATE_SYNC_BAD_ARGUMENT", `${name} must be a list of names or a comma-separated string, got ${JSON.stringify(v)}`);
}

function isTrue(v: unknown): boolean {
  return v === true || v === "True" || v === "true";
}

function portOf(ctx: RunnerContext): MessagePort | undefined {
  return ctx.cluster?.stateSync;
}

const ROOTS: Record<string, string[]> = {
  both: ["file_roots", "pillar_roots"],
  file: ["file_roots"],
  file_roots: ["file_roots"],
  pillar: ["pillar_roots"],
  pillar_roots: ["pillar_roots"],
};

/**
 * The state-sync thread's per-peer reports with the minion banks' pulls added (summed per peer, errors and failed
 * channels joined; `in_flight` when a minion bank's pull from that peer goes on).
 */
export function mergeCollected(fromSync: Record<string, PeerReport>, pulls: readonly Record<string, PullReport>[]): Record<string, PeerReport & { in_flight?: true }> {
  const out: Record<string, PeerReport & { in_flight?: true }> = {};
  for (const [p, r] of Object.entries(fromSync)) out[p] = { ...r, errors: [...r.errors], ...(r.failed ? { failed: [...r.failed] } : {}) };
  for (const pull of pulls) {
    for (const [p, r] of Object.entries(pull)) {
      const o = (out[p] ??= { items: 0, bytes: 0, deleted: 0, errors: [], ms: 0 });
      o.items += r.items;
      o.bytes += r.bytes;
      o.ms = Math.max(o.ms, r.ms);
      o.errors.push(...r.errors);
      if (r.failed) (o.failed ??= []).push(...r.failed);
      if (r.in_flight) o.in_flight = true;
    }
  }
  return Object.fromEntries(Object.keys(out).sort().map((p) => [p, out[p]!]));
}

/** `timeout` (seconds; an argument, or salt-run's -t): the time by which collect_from_peers answers, Infinity when absent. */
function timeoutArg(v: unknown): number {
  if (v === undefined || v === null || v === "") return Infinity;
  const n = typeof v === "string" ? Number(v) : v;
  if (typeof n !== "number" || !Number.isFinite(n) || n <= 0) throw new BrineError("STATE_SYNC_BAD_ARGUMENT", `timeout must be a number of seconds above 0, got ${JSON.stringify(v)}`);
  return Date.now() + n * 1000;
}

/**
 * collect_from_peers of a minion bank (the Raft worker's pull: minion-broadcast.ts), waited for as long as it
 * makes progress rather than one call's deadline: the runner asks in calls of at most a third of the Raft
 * client's call deadline, and answers when the collection is done, when `until` passes (the operator's
 * timeout) or when no master answered anything for collectStallMs. Returned early, a master still being pulled
 * from is `in_flight` in its report (what it gave so far counted); the pull goes on and its outcome is logged.
 */
async function collectMinionBank(raft: Pick<RaftClient, "minionQuery" | "callTimeoutMs">, bank: MinionBank, until: number): Promise<Record<string, PullReport>> {
  // a third of the call deadline (RaftClient's: ~15 s), so a call never waits out its own deadline
  const pollMs = Math.max(50, Math.floor((Number.isFinite(raft.callTimeoutMs) ? raft.callTimeoutMs : 15_000) / 3));
  const waitFor = () => Math.max(0, Math.min(pollMs, until - Date.now()));
  let a = await raft.minionQuery({ op: "collect", bank, waitMs: waitFor() });
  let requests = a.collect?.requests ?? 0;
  let movedAt = Date.now();
  while (a.collect && !a.collect.done) {
    if (Date.now() >= until) {
      log.warning(`collect_from_peers minions/${bank}: answered at its timeout with the pull from ${inFlight(a)} still going on (its outcome goes to this log)`);
      break;
    }
    if (Date.now() - movedAt >= collectStallMs) {
      log.warning(`collect_from_peers minions/${bank}: no master answered for ${collectStallMs / 1000} s; answered with the pull from ${inFlight(a)} still going on (its outcome goes to this log)`);
      break;
    }
    a = await raft.minionQuery({ op: "collect", bank, id: a.collect.id, waitMs: waitFor() });
    if ((a.collect?.requests ?? 0) !== requests) {
      requests = a.collect?.requests ?? 0;
      movedAt = Date.now();
    }
  }
  return a.collected ?? {};
}

const inFlight = (a: MinionAnswer) => Object.entries(a.collected ?? {}).filter(([, r]) => r.in_flight).map(([p]) => p).join(", ") || "no master";

export const stateSyncRunners: Record<string, RunnerFn> = {
  "cluster.sync_roots": async (ctx: RunnerContext, arg, kwarg) => {
    const roots = argOf(arg, kwarg, 0, "roots", "both");
    const channels = typeof roots === "string" ? ROOTS[roots] : undefined;
    if (!channels) throw new BrineError("STATE_SYNC_BAD_ARGUMENT", `roots must be "both", "file" or "pillar" (or "file_roots", "pillar_roots"), got ${JSON.stringify(roots)}`);
    if (!ctx.cfg.cluster_id) return NOT_CLUSTERED;
    const port = portOf(ctx);
    if (!port) throw new BrineError("STATE_SYNC_UNAVAILABLE", "the peer channel is not running on this master");
    const async = isTrue(kwarg.async);
    const r = await askStateSync(port, { op: "sync_roots", channels, async });
    if (async) return { status: "fan-out initiated", channels, cluster_id: ctx.cfg.cluster_id, note: `peers ${((r as { peers?: string[] }).peers ?? []).join(", ") || "(none)"} pull in the background; outcome in each master's log and cachedir/brine-state-sync/status.json` };
    return r;
  },

  "cluster.collect_from_peers": async (ctx: RunnerContext, arg, kwarg) => {
    const channels = listArg(argOf(arg, kwarg, 0, "channels", []), "channels");
    const banks = listArg(argOf(arg, kwarg, 1, "banks", COLLECT_BANKS_DEFAULT), "banks");
    for (const c of channels) if (!(KEY_CHANNELS as readonly string[]).includes(c)) throw new BrineError("STATE_SYNC_BAD_ARGUMENT", `channels may only name ${KEY_CHANNELS.join(" and ")} (as Salt's), got ${JSON.stringify(c)}`);
    const known = [...BANKS, ...Object.keys(MINION_BANK_NAMES)];
    for (const b of banks) if (!known.includes(b)) throw new BrineError("STATE_SYNC_BAD_ARGUMENT", `unknown bank ${JSON.stringify(b)}; banks: ${known.join(", ")}`);
    // the job cache's banks and the key channels: the state-sync thread; the minion banks (mine, grains and
    // pillar): the Raft worker, which pulls the records this master lacks or holds older (minion-placement.ts)
    const minionBanks = banks.filter((b) => b in MINION_BANK_NAMES);
    const all = [...channels, ...banks.filter((b) => !(b in MINION_BANK_NAMES)).map((b) => `bank:${b}`)];
    if (all.length === 0 && minionBanks.length === 0) throw new BrineError("STATE_SYNC_BAD_ARGUMENT", "name at least one channel or bank");
    if (!ctx.cfg.cluster_id) return NOT_CLUSTERED;
    const async = isTrue(kwarg.async);
    const port = portOf(ctx);
    if (all.length > 0 && !port) throw new BrineError("STATE_SYNC_UNAVAILABLE", "the peer channel is not running on this master");
    if (minionBanks.length > 0 && !ctx.cluster?.raft) throw new BrineError("STATE_SYNC_UNAVAILABLE", "the Raft worker is not running on this master");
    const until = timeoutArg(kwarg.timeout ?? ctx.timeoutS);
    const names = [...all, ...minionBanks.map((b) => `bank:${b}`)];
    if (async) {
      // the transfers run on in the state-sync thread and the Raft worker; their outcome goes to the log
      await Promise.all(minionBanks.map((b) => ctx.cluster!.raft.minionQuery({ op: "collect", bank: MINION_BANK_NAMES[b]!, waitMs: 0 })));
      if (all.length > 0) await askStateSync(port!, { op: "collect", channels: all, async });
      return { status: "fan-out initiated", tag: "cluster/runner/collect_from_peers", data: { channels: names } };
    }
    const minions = Promise.all(minionBanks.map((b) => collectMinionBank(ctx.cluster!.raft, MINION_BANK_NAMES[b]!, until)));
    const [fromSync, fromRaft] = await Promise.all([all.length > 0 ? (askStateSync(port!, { op: "collect", channels: all, async: false }) as Promise<Record<string, PeerReport>>) : Promise.resolve({}), minions]);
    return mergeCollected(fromSync, fromRaft);
  },
};
