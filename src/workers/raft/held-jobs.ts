/**
 * The job cache of every master, as the ring runners need it over the peer channel:
 * - `raft/shed`: run a shed here (cluster.shed_unowned_all; src/lib/store/shed.ts), write this master's
 *   shed status file (source "peer_request") and answer the result;
 * - `raft/jobs-held`: which jobs each master holds, for cluster.placement_check:
 * the runner asks its Raft worker (the thread that owns the peer channel), which asks every other member of
 * the cluster group and answers with each one's jids (or why it could not).
 *
 * The answering worker reads its master's job cache (the LMDB store every request worker and runner opens;
 * lmdb-js shares one environment between threads), opened on the first question (job-placement.ts, which
 * writes to it, shares the same handle). Answers are
 * bounded: at most `max` jids (newest kept), with `truncated` set when the cache holds more.
 */
import { cbor } from "../../shared/cbor.js";
import { BrineError } from "../../shared/errors.js";
import { JobCache } from "../../lib/store/job-cache.js";
import { dataTypeOf, MINION_OUTBOX_PREFIX, parseMinionOutboxKey, type MinionBank, type MinionShedAnswer } from "../../shared/minion-placement.js";
import { outboxJid } from "../../shared/placement.js";
import { openStore, type Store, type StoreConfig } from "../../lib/store/lmdb-env.js";
import { shedBanks, writeShedStatus, type ShedArgs, type ShedOwnership, type ShedResult } from "../../lib/store/shed.js";
import type { PeerMessage } from "./peer/peer-types.js";
import type { RingCallChannel } from "./ring-forward.js";

export const JOBS_HELD_CHANNEL = "raft/jobs-held";
export const SHED_CHANNEL = "raft/shed";
/** jids one answer carries at most (~25 bytes each: well inside one peer frame) */
export const heldJidsMax = 200_000;


export interface HeldJobs {
  jids: string[];
  /** the cache holds more than `max` jids: only the newest were sent */
  truncated: boolean;
  /** job records in this master's hand-off outbox, waiting for their owners (job-placement.ts) */
  pending?: number;
  /** `raft/placement` requests this master answered since its start, by op (job-placement.ts) */
  served?: Record<string, number>;
  /** what else its hand-off outbox holds (remove_member says what a forced removal loses) */
  outbox?: OutboxContent;
}

/** A master's hand-off outbox beyond the job records' count: its minion records, and the first few of each by name. */
export interface OutboxContent {
  /** minion records (`~m/`, `~d/` keys) waiting */
  minions: number;
  /** the first outboxNamesMax distinct jids with records waiting */
  jids: string[];
  /** the first outboxNamesMax minion records waiting, as `mine/<id>` or `grains/<id>` */
  ids: string[];
}

/** jids and minion records an outbox summary names at most, count */
export const outboxNamesMax = 100;
/** job outbox keys walked at most to name its jids (a jid's returns are keys of their own), count */
const outboxKeysWalkedMax = 20_000;

/** The outbox of `s` beyond its job records' count (see OutboxContent). */
export function outboxContent(s: Store): OutboxContent {
  const jids: string[] = [];
  let walked = 0;
  for (const key of s.handoff.getKeys({ end: MINION_OUTBOX_PREFIX, limit: outboxKeysWalkedMax })) {
    walked++;
    const jid = outboxJid(key as string);
    if (jids[jids.length - 1] !== jid) jids.push(jid);
    if (jids.length >= outboxNamesMax || walked >= outboxKeysWalkedMax) break;
  }
  const ids: string[] = [];
  for (const key of s.handoff.getKeys({ start: MINION_OUTBOX_PREFIX, limit: outboxNamesMax })) {
    const k = parseMinionOutboxKey(key as string);
    if (k) ids.push(`${dataTypeOf(k.bank)}/${k.id}`);
  }
  return { minions: s.handoff.getCount({ start: MINION_OUTBOX_PREFIX }), jids, ids };
}

function checkOutbox(raw: unknown): OutboxContent | undefined {
  if (typeof raw !== "object" || raw === null) return undefined;
  const o = raw as Record<string, unknown>;
  const names = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string" && x.length <= 512).slice(0, outboxNamesMax) : []);
  return Number.isSafeInteger(o.minions) ? { minions: o.minions as number, jids: names(o.jids), ids: names(o.ids) } : undefined;
}

/** One master's answer, or why it could not be had. */
export type HeldJobsAnswer = HeldJobs | { error: string };

/** The newest `max` of `all` (jids sort by time). */
export function newest(all: string[], max: number): HeldJobs {
  return all.length > max ? { jids: all.slice(all.length - max), truncated: true } : { jids: all, truncated: false };
}

export class HeldJobsService {
  private store: Store | undefined;
  private readonly offs: (() => void)[];
  /** this master's `raft/placement` requests answered, by op (set once job placement runs) */
  served: (() => Record<string, number>) | undefined;
  /** a shed of a minion bank here (minion-placement.ts; set once minion placement runs) */
  minionShed: ((ring: string, bank: MinionBank, dryRun: boolean) => Promise<MinionShedAnswer>) | undefined;

  /** `ownership(ring)`: what this master may shed of `ring` (from its applied cluster and ring state) */
  constructor(
    private readonly storeConfig: StoreConfig,
    private readonly channel: RingCallChannel,
    private readonly timeoutMs: number,
    private readonly self: string,
    private readonly ownership: (ring: string) => ShedOwnership,
    /** whether the peer channel has a session with `peer` now: one without is not asked (its answer would only time out) */
    private readonly up: (peer: string) => boolean = () => true,
  ) {
    this.offs = [channel.on(JOBS_HELD_CHANNEL, (m) => this.serve(m)), channel.on(SHED_CHANNEL, (m) => this.serveShed(m))];
  }

  close(): void {
    for (const off of this.offs) off();
  }

  /** The job cache's store, opened on first use (job-placement.ts shares it). */
  open(): Store {
    return (this.store ??= openStore(this.storeConfig));
  }

  /** This master's jids, newest `max`. */
  local(max: number): HeldJobs {
    const s = this.open();
    return { ...newest(new JobCache(s).listJids(), Math.min(max, heldJidsMax)), pending: s.handoff.getCount({ end: MINION_OUTBOX_PREFIX }), ...(this.served ? { served: { ...this.served() } } : {}), outbox: outboxContent(s) };
  }

  /** Runs the shed on every listed peer (each writes its own status file); a peer that failed: status "error". */
  async shedOn(peers: readonly string[], a: ShedArgs): Promise<Record<string, ShedResult>> {
    const payload = Uint8Array.from(cbor.encode(a));
    const answers = await Promise.all(
      peers.map(async (p): Promise<[string, ShedResult]> => {
        if (!this.up(p)) return [p, { status: "error", ring: a.ring, dropped: 0, kept: 0, subbanks_dropped: 0, dry_run: a.dryRun, error: "down (no peer session)" }];
        try {
          return [p, cbor.decode(await this.channel.request(p, SHED_CHANNEL, payload, this.timeoutMs)) as ShedResult];
        } catch (e) {
          return [p, { status: "error", ring: a.ring, dropped: 0, kept: 0, subbanks_dropped: 0, dry_run: a.dryRun, error: (e as Error).message }];
        }
      }),
    );
    return Object.fromEntries(answers);
  }

  private async serveShed(m: PeerMessage): Promise<Uint8Array> {
    if (!m.request) throw new BrineError("CLUSTER_PEER_CHANNEL", `${SHED_CHANNEL} takes requests only`);
    const a = checkShedArgs(cbor.decode(m.payload));
    const minionShed = this.minionShed;
    const r = await shedBanks(this.open(), a, this.ownership(a.ring), async (bank) => {
      if (!minionShed) throw new BrineError("RAFT_API_MISUSE", "no minion data placement on this master");
      return minionShed(a.ring, bank, a.dryRun);
    });
    writeShedStatus(this.storeConfig.cachedir, r, "peer_request", this.self);
    return Uint8Array.from(cbor.encode(r));
  }

  /** Every listed peer's jids, asked in parallel. */
  async ask(peers: readonly string[], max: number): Promise<Record<string, HeldJobsAnswer>> {
    const payload = Uint8Array.from(cbor.encode({ max: Math.min(max, heldJidsMax) }));
    const answers = await Promise.all(
      peers.map(async (p): Promise<[string, HeldJobsAnswer]> => {
        if (!this.up(p)) return [p, { error: "down (no peer session)" }];
        try {
          const r = cbor.decode(await this.channel.request(p, JOBS_HELD_CHANNEL, payload, this.timeoutMs)) as HeldJobs;
          if (!Array.isArray(r?.jids) || !r.jids.every((j) => typeof j === "string")) return [p, { error: "malformed answer" }];
          const served = r.served !== null && typeof r.served === "object" && Object.values(r.served).every((n) => Number.isSafeInteger(n)) ? { served: r.served } : {};
          const outbox = checkOutbox(r.outbox);
          return [p, { jids: r.jids, truncated: r.truncated === true, ...(Number.isSafeInteger(r.pending) ? { pending: r.pending } : {}), ...served, ...(outbox ? { outbox } : {}) }];
        } catch (e) {
          return [p, { error: (e as Error).message }];
        }
      }),
    );
    return Object.fromEntries(answers);
  }

  private serve(m: PeerMessage): Uint8Array {
    if (!m.request) throw new BrineError("CLUSTER_PEER_CHANNEL", `${JOBS_HELD_CHANNEL} takes requests only`);
    let max = heldJidsMax;
    try {
      const q = cbor.decode(m.payload) as { max?: unknown };
      if (Number.isSafeInteger(q?.max) && (q.max as number) > 0) max = Math.min(q.max as number, heldJidsMax);
    } catch {
      throw new BrineError("CLUSTER_BAD_ENTRY", "jobs-held question is not CBOR");
    }
    return Uint8Array.from(cbor.encode(this.local(max)));
  }
}

/** A peer's shed arguments, checked (the bank names are checked again by shedUnowned). */
export function checkShedArgs(raw: unknown): ShedArgs {
  const o = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === "string" ? v : null);
  if (typeof o.ring !== "string" || !Array.isArray(o.banks) || o.banks.length > 16 || !o.banks.every((b) => typeof b === "string") || typeof o.dryRun !== "boolean") {
    throw new BrineError("CLUSTER_BAD_ENTRY", "shed arguments are {ring, banks, subbankTemplate, driver, dryRun}");
  }
  return { ring: o.ring, banks: o.banks as string[], subbankTemplate: str(o.subbankTemplate), driver: str(o.driver), dryRun: o.dryRun };
}
