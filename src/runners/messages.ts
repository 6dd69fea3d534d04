/**
 * Messages between the control server (main thread) and a runner thread, in the style of src/shared/port-calls.ts
 * (told apart by `k`; streams, no calls): RunnerToMain and MainToRunner cross the thread's port. RunnerMessage is
 * what the control server hands on to the call's client (the control socket's reply stream to salt-run, told apart
 * by `type` on that wire); the control server makes one from each RunnerToMain.
 */
import type { MasterConfig } from "../shared/config/defaults.js";
import type { RunnerClusterLink } from "../main-thread/cluster/cluster-node.js";

export interface RunnerInit {
  cfg: MasterConfig;
  fun: string;
  arg: unknown[];
  kwarg: Record<string, unknown>;
  log: { level: string; file: string | null; fileLevel: string | null };
  /** when `cluster_id` is set: the shared ring buffer and a port to the Raft worker (in the transfer list) */
  cluster?: RunnerClusterLink;
  /** the call's jid and user: the thread stores the job in the job cache when it ends (job-record.ts) */
  job?: { jid: string; user: string };
  /** the master's metrics board (src/shared/metrics/board.ts), for brine.stats */
  metrics?: SharedArrayBuffer;
  /** salt-run's `-t`, seconds, when given: this call's `cfg.timeout` too (Salt's salt-run sets opts["timeout"]), never an argument */
  timeoutS?: number;
  /** salt-run's `--async`: the thread posts `started` once it has found the runner, before running it */
  async?: true;
}

/**
 * A runner's return crosses to the main thread already msgpack-encoded (`packed`, transferred, not cloned): the
 * main thread puts those bytes in the control reply and the `salt/run/<jid>/ret` event as they are, so a large
 * result (jobs.list_jobs of 100,000 jobs) costs it no structured clone, no encoding and no decoding, and a result
 * msgpack cannot carry is an error in the runner thread, not in the master's main thread. The caller is answered on
 * `return`; `recorded` follows once the call's job record is committed (job-record.ts), and only then is
 * `salt/run/<jid>/ret` fired, so a reader woken by that event finds the job. `success` is false for a
 * return whose `data` holds a failed state run (Salt's RunnerClient: check_result of `return["data"]`). `fire` asks
 * the master to fire an event; only `salt/run/<the runner's jid>/args` is fired (orchestration's progress).
 */
/** `loaded`: a spare thread has loaded and warmed up and waits for its call (before any call only; the control server notes it). */
/** `stopped`: the answer to `stop`, its zeromq sockets closed (the host may end the thread now). */
/** `started`: an `async` call's runner was found and runs now (its caller is answered with the jid and leaves). */
export type RunnerToMain = { k: "started" } | { k: "print"; text: string } | { k: "fire"; tag: string; data: unknown } | { k: "return"; packed: Uint8Array; success?: boolean } | { k: "recorded" } | { k: "error"; message: string; unavailable?: true } | { k: "loaded" } | { k: "stopped" } | RunnerSync;

/** Clustered: cache-sync record batches (encoded) for the peers, from a runner that wrote the minion data cache (cache.clear_*); never reaches the caller */
export interface RunnerSync {
  k: "sync";
  batches: Uint8Array[];
}

/** main → runner: every bus event while the runner runs (a bus frame, as the automation thread gets them) */
/** A bus event for the runner; or, to a spare thread (started before its call), the call itself, first. */
/**
 * `stop`: the host is about to end the thread (its call abandoned or failed, the master stopping): it closes its
 * zeromq sockets and answers `stopped` (a thread ended while one waits for a reply aborts the process). With
 * `abandoned`, the call's caller left before its return (salt-run ended by Ctrl-C or a signal): the thread first
 * records the call's job as failed with that text (retcode 1), as Salt's runner ended by its salt-run's SIGINT is
 * stored, and no later result of the call is recorded.
 */
export type MainToRunner = { k: "ev"; frame: Uint8Array } | { k: "init"; init: RunnerCall } | { k: "stop"; abandoned?: string };

/**
 * A call posted to a thread that already has its configuration (a spare's workerData, or a kept-warm thread's last
 * call, the same object on the main thread) comes without it: the master's configuration (~220 keys) was cloned on
 * the main thread and again in the runner thread for every call (post of an init ~0.12 ms on the main thread at load
 * 6, of a call of ~2.5 ms).
 */
export type RunnerCall = Omit<RunnerInit, "cfg"> & { cfg?: MasterConfig };

/**
 * A spare runner thread's workerData: it loads its modules, opens the job cache and loads the jobs.* runners (the
 * calls salt-run makes most), then waits for its call (`{k: "init"}`).
 */
export interface SpareRunnerData {
  spare: true;
  log: RunnerInit["log"];
  /** the master's configuration, so the spare opens its job cache handle before its call comes */
  cfg: MasterConfig;
}

/** What the call's client gets (control socket stream; an awaited runner's result relay): a print, the return's bytes, or an error. */
/** `unavailable` on an error: no runner of that name (Salt's "'x' is not available.") */
export type RunnerMessage = { type: "started" } | { type: "print"; text: string } | { type: "return"; packed: Uint8Array } | { type: "error"; message: string; unavailable?: true };

/**
 * The runners whose thread is kept for the next such call once a call ended well (control-server.ts): they read the
 * job cache and write only their own job record, so a thread is no fresher for them new, and a warm one (its code
 * compiled, its store open, no thread start) answers in a few ms where a new one took ~5-10 ms. A call that fails,
 * is abandoned or runs another runner ends its thread as before.
 */
const KEPT_WARM: ReadonlySet<string> = new Set(["jobs.lookup_jid", "jobs.list_jobs", "jobs.list_job", "jobs.print_job", "jobs.last_run", "jobs.exit_success"]);

/** Whether a thread that ran `fun` well waits for the next kept-warm call instead of ending. */
export function keptWarm(fun: string): boolean {
  return KEPT_WARM.has(fun);
}
