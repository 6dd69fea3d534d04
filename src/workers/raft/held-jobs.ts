/**
 * Which jobs each master holds, asked over the peer channel (`raft/jobs-held`), for cluster.placement_check:
 * the runner asks its Raft worker (the thread that owns the peer channel), which asks every other member of
 * the cluster group and answers with each one's jids (or why it could not).
 *
 * The answering worker reads its master's job cache (the LMDB store every request worker and runner opens;
 * lmdb-js shares one environment between threads), opened on the first question and read only. Answers are
 * bounded: at most `max` jids (newest kept), with `truncated` set when the cache holds more.
 */
import { Encoder } from "cbor-x";
import { BrineError } from "../../shared/errors.js";
import { JobCache } from "../../lib/store/job-cache.js";
import { openStore, type StoreConfig } from "../../lib/store/lmdb-env.js";
import type { PeerMessage } from "./peer/peer-types.js";
import type { RingCallChannel } from "./ring-forward.js";

export const JOBS_HELD_CHANNEL = "raft/jobs-held";
/** jids one answer carries at most (~25 bytes each: well inside one peer frame) */
export const HELD_JIDS_MAX = 200_000;

const cbor = new Encoder({ mapsAsObjects: true, useRecords: false, tagUint8Array: false });

export interface HeldJobs {
  jids: string[];
  /** the cache holds more than `max` jids: only the newest were sent */
  truncated: boolean;
}

/** One master's answer, or why it could not be had. */
export type HeldJobsAnswer = HeldJobs | { error: string };

/** The newest `max` of `all` (jids sort by time). */
export function newest(all: string[], max: number): HeldJobs {
  return all.length > max ? { jids: all.slice(all.length - max), truncated: true } : { jids: all, truncated: false };
}

export class HeldJobsService {
  private jobs: JobCache | undefined;
  private readonly off: () => void;

  constructor(
    private readonly store: StoreConfig,
    private readonly channel: RingCallChannel,
    private readonly timeoutMs: number,
  ) {
    this.off = channel.on(JOBS_HELD_CHANNEL, (m) => this.serve(m));
  }

  close(): void {
    this.off();
  }

  /** This master's jids, newest `max`. */
  local(max: number): HeldJobs {
    this.jobs ??= new JobCache(openStore(this.store));
    return newest(this.jobs.listJids(), Math.min(max, HELD_JIDS_MAX));
  }

  /** Every listed peer's jids, asked in parallel. */
  async ask(peers: readonly string[], max: number): Promise<Record<string, HeldJobsAnswer>> {
    const payload = Uint8Array.from(cbor.encode({ max: Math.min(max, HELD_JIDS_MAX) }));
    const answers = await Promise.all(
      peers.map(async (p): Promise<[string, HeldJobsAnswer]> => {
        try {
          const r = cbor.decode(await this.channel.request(p, JOBS_HELD_CHANNEL, payload, this.timeoutMs)) as HeldJobs;
          if (!Array.isArray(r?.jids) || !r.jids.every((j) => typeof j === "string")) return [p, { error: "malformed answer" }];
          return [p, { jids: r.jids, truncated: r.truncated === true }];
        } catch (e) {
          return [p, { error: (e as Error).message }];
        }
      }),
    );
    return Object.fromEntries(answers);
  }

  private serve(m: PeerMessage): Uint8Array {
    if (!m.request) throw new BrineError("CLUSTER_PEER_CHANNEL", `${JOBS_HELD_CHANNEL} takes requests only`);
    let max = HELD_JIDS_MAX;
    try {
      const q = cbor.decode(m.payload) as { max?: unknown };
      if (Number.isSafeInteger(q?.max) && (q.max as number) > 0) max = Math.min(q.max as number, HELD_JIDS_MAX);
    } catch {
      throw new BrineError("CLUSTER_BAD_ENTRY", "jobs-held question is not CBOR");
    }
    return Uint8Array.from(cbor.encode(this.local(max)));
  }
}
