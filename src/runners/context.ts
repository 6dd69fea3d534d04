/** What a runner function sees (in its runner thread). */
import type { MasterConfig } from "../shared/config/defaults.js";
import type { BusEvent } from "../shared/event-frame.js";
import type { LocalClient } from "../lib/client/local-client.js";
import type { JobCache } from "../lib/store/job-cache.js";
import type { Store } from "../lib/store/lmdb-env.js";
import type { MinionCache } from "../lib/store/minion-cache.js";
import type { KeyStore } from "../lib/pki/key-store.js";
import type { RingReader } from "../shared/sab-ring/reader.js";
import type { MessagePort } from "node:worker_threads";
import type { RaftClient } from "../workers/raft/client.js";
import { clusterCheckMinions, PlacedAddresses, type ClusterMinions } from "../lib/targeting/cluster.js";
import { dataTypeOf } from "../shared/minion-placement.js";
import { getLogger } from "../shared/log.js";

const log = getLogger("brine.runner");

/** Live cluster state for runners (only when `cluster_id` is set). */
export interface RunnerCluster {
  /** this master's stable node id */
  nodeId: string;
  /** the shared ring buffer the Raft worker publishes to */
  ring: RingReader;
  /** the Raft worker's API */
  raft: RaftClient;
  /** peer liveness from the peer channel (src/shared/peer-health.ts), when it runs */
  health?: SharedArrayBuffer;
  /** the state-sync thread's runner port (engine.ts RunnerAsk), when the peer channel runs */
  stateSync?: MessagePort;
}

export interface RunnerContext {
  cfg: MasterConfig;
  jobs: JobCache;
  /** the job cache's LMDB store itself (cluster.shed_unowned removes keys bank by bank); absent in some tests */
  store?: Store;
  minions: MinionCache;
  keys: KeyStore;
  client: LocalClient;
  /** stream a line to the caller (state.event) */
  print(text: string): void;
  /** bus events as they happen, from the moment the runner started */
  events(): AsyncIterable<BusEvent>;
  /** set when clustering is on */
  cluster?: RunnerCluster;
  /** the master's metrics board (src/shared/metrics/board.ts) */
  metrics?: SharedArrayBuffer;
  /** this call's jid, when it is a job (orchestration passes it on as Salt's orchestration_jid) */
  jid?: string;
  /** the user the call runs as (orchestration's runner and wheel calls run as the same user) */
  user?: string;
  /** fire `salt/run/<jid>/args` (the only tag the master fires for a runner: orchestration's progress, as Salt's fire_args) */
  fireArgs?(data: unknown): void;
  /** salt-run's `-t`, seconds, when the caller gave it (`cfg.timeout` is then the same) */
  timeoutS?: number;
}

/**
 * A runner's return already msgpack-encoded (jobs.list_jobs makes its answer from stored bytes): the runner
 * thread sends and stores these bytes as they are, where it encodes any other return itself. A caller that runs
 * a runner function directly (a test) decodes it as salt-run would.
 */
export class EncodedReturn {
  constructor(
    readonly bytes: Buffer,
    /** the bytes' ArrayBuffer holds nothing else (not a slice of a shared pool): handed to the main thread as it is */
    readonly soleOwner = false,
  ) {}
}

export type RunnerFn = (ctx: RunnerContext, arg: unknown[], kwarg: Record<string, unknown>) => Promise<unknown>;

/** Salt's runner calling convention: positional args then kwargs by name. */
export function argOf(arg: unknown[], kwarg: Record<string, unknown>, index: number, name: string, dflt: unknown): unknown {
  if (name in kwarg) return kwarg[name];
  return arg.length > index ? arg[index] : dflt;
}

/**
 * Clustered: the other masters' minion data through this runner's Raft worker, for the banks placed on a ring
 * (`grains`, `mine` routed: src/lib/targeting/cluster.ts); undefined on a single master.
 */
export function clusterMinionsOf(ctx: RunnerContext): ClusterMinions | undefined {
  const c = ctx.cluster;
  if (!c) return undefined;
  return { ask: (q) => c.raft.minionQuery(q), placed: (bank) => c.ring.route(dataTypeOf(bank)) !== null, warn: (line) => log.warning(line) };
}

/**
 * The grains presence matches `ids`' connections against (manage.present and the like, brine.stats): this
 * master's, and with `grains` placed on a ring the addresses of those whose data is on other masters.
 */
export function presenceGrainsOf(ctx: RunnerContext, ids: readonly string[]): Promise<(id: string) => Record<string, unknown> | undefined> {
  return new PlacedAddresses((id) => ctx.minions.get(id)?.grains as Record<string, unknown> | undefined, () => clusterMinionsOf(ctx), Date.now).lookup(ids);
}

/** Accepted minions a target selects (Salt's CkMinions.check_minions for runners): with `grains` placed on a ring, the data on other masters counts too: with `grains` placed on a ring, the data on other masters counts too. */
export async function clusterTargetIds(ctx: RunnerContext, tgt: unknown, tgtType: string, greedy = true): Promise<string[]> {
  const targets = { acceptedIds: ctx.keys.list("accepted"), minionData: (id: string) => ctx.minions.get(id), nodegroups: ctx.cfg.nodegroups ?? {}, greedy };
  return (await clusterCheckMinions(tgt, tgtType, targets, {}, clusterMinionsOf(ctx))).minions;
}
