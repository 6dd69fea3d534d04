/**
 * Cache sync on the main thread (with `cluster_id`): what Salt shared through a shared `cachedir` (the minion
 * data cache, the mine, session keys, `token_dir`) and what it read with `ss` (connected minions), brine shares
 * over the peer channel. The main thread only moves bytes: records are encoded by the request worker that wrote
 * them and decoded and stored by the mirror thread (mirror.ts).
 *
 * - **Live** (`cl/sync`, one-way): each batch of records a request worker produced goes once to every peer with
 *   a session, as is; a peer's mirror thread stores the newer ones (records.ts). Received records are never
 *   sent on. A session key reaches the peers in the same turn as the auth reply that carries it is written.
 * - **Bulk** (`cl/sync-pull`, request/response): when a session to a peer comes up (a master started, came
 *   back, or a partition healed), this master pulls the peer's copy in chunks (sync-store.ts: at most
 *   syncChunkIdsMax minions, about syncChunkBytesMax), one chunk in flight per peer, so a master that
 *   missed writes while it was away gets them. After a completed pull, the next one from that peer asks only
 *   for what was written since (less pullSinceSlackMs for clock differences). The same pull carries the
 *   peer's job cache from the time this master last heard from it (less the same slack; before anything was
 *   heard from it since this master started: from this master's own newest job), since what was forwarded to a
 *   master that was stopped, paused or cut off never reached it. A master that was itself paused (SIGSTOP, a
 *   frozen VM) may read its peers' stale messages before it notices: a stall of its event loop counts as having
 *   heard nothing from anyone since the stall began, until the next completed pull from each. Every pull also
 *   carries the request nonces the peer remembers (src/shared/nonce-journal.ts): a frame a peer accepted while
 *   this master was away is refused when replayed here.
 * - **Presence** (`cl/presence`, one-way): every presenceShareMs the minions this master sees connected go to
 *   every peer (presence-board.ts), so "[Not connected]" and manage.present answer for the whole cluster.
 */
import { getLogger } from "../../shared/log.js";
import { presenceShareMs } from "../../workers/req-handler/presence.js";
import type { MirrorThread } from "../state-sync-host.js";
import { encodePresence } from "../../lib/store/presence-board.js";
import { encodePull, type SyncCursor } from "../../workers/state-sync/sync-store.js";
import { LogBudget } from "../../shared/log-budget.js";

const log = getLogger("brine.cluster.sync");
/** one line per 10 s for this flood, then a count of what was held back */
const dropLog = new LogBudget(1, 10_000, (line) => log.warning(line), "cache sync");

export const SYNC_CHANNEL = "cl/sync";
export const SYNC_PULL_CHANNEL = "cl/sync-pull";
export const PRESENCE_CHANNEL = "cl/presence";
/** one pull request, ms */
export const pullRequestTimeoutMs = 30_000;
/** a later pull from the same peer re-reads this much before the last completed one (clock differences), ms */
export const pullSinceSlackMs = 5 * 60_000;
/** wait before retrying a pull that failed while the peer is still up, ms */
const pullRetryMs = 2_000;
/** pulls tried in a row after failures before giving up until the next session or heal, count */
const pullAttemptsMax = 5;
/** the stall detector's tick, ms */
const stallTickMs = 1_000;
/** a gap between two ticks longer than this is a stall (this master was paused or frozen), ms */
export const stallGapMs = 3_000;

/** What the service needs of the peer channel (ClusterService's filtered view has it). */
export interface SyncChannel {
  send(peerId: string, channel: string, payload: Uint8Array): void;
  request(peerId: string, channel: string, payload: Uint8Array, timeoutMs: number): Promise<Uint8Array>;
  upPeers(): string[];
  isUp(peerId: string): boolean;
  on(channel: string, handler: (msg: { from: string; payload: Uint8Array }) => unknown): () => void;
}

export interface SyncCounters {
  batchesOut: number;
  batchesIn: number;
  pulls: number;
  pullChunks: number;
  pullFailures: number;
  presenceOut: number;
  dropped: number;
}

interface PullState {
  /** pull again when this one ends (asked for meanwhile, or it failed) */
  again: boolean;
  /** failed attempts in a row */
  failures: number;
}

export class CacheSyncService {
  readonly counters: SyncCounters = { batchesOut: 0, batchesIn: 0, pulls: 0, pullChunks: 0, pullFailures: 0, presenceOut: 0, dropped: 0 };
  private readonly offs: (() => void)[] = [];
  /** per peer: a pull running (and whether another was asked for meanwhile) */
  private readonly pulling = new Map<string, PullState>();
  /** per peer: when the last completed pull started (this master's clock) */
  private readonly lastPull = new Map<string, number>();
  /** per peer: when a message of it last arrived (events, records, presence; this master's clock) */
  private readonly lastHeard = new Map<string, number>();
  /** when the newest job in this master's cache was created, read once before any peer's events are stored */
  private readonly newestAtStart: Promise<number | undefined>;
  /** per peer: the start of a stall of this master not yet covered by a completed pull from it */
  private readonly stallFloor = new Map<string, number>();
  private tick = Date.now();
  private readonly stallTimer: NodeJS.Timeout;
  private timer: NodeJS.Timeout | undefined;
  private sharing = false;
  private closed = false;

  constructor(
    private readonly channel: SyncChannel,
    private readonly mirror: MirrorThread,
    private readonly presentIds?: () => Promise<string[]>,
    private readonly jobCache = true,
  ) {
    this.newestAtStart = jobCache ? mirror.newestJobMs() : Promise.resolve(undefined);
    this.stallTimer = setInterval(() => this.checkStall(), stallTickMs);
    this.stallTimer.unref();
    this.offs.push(channel.on(SYNC_CHANNEL, (m) => this.onRecords(m.from, m.payload)));
    this.offs.push(channel.on(SYNC_PULL_CHANNEL, (m) => this.mirror.serve(m.payload)));
    this.offs.push(
      channel.on(PRESENCE_CHANNEL, (m) => {
        this.heard(m.from);
        this.mirror.presence(m.from, m.payload);
      }),
    );
    if (presentIds) {
      this.timer = setInterval(() => void this.sharePresence(), presenceShareMs);
      this.timer.unref();
    }
  }

  /** Record batches this master's request workers produced (encoded there): once to every peer with a session. */
  forward(batches: readonly Uint8Array[]): void {
    const peers = this.channel.upPeers();
    for (const b of batches) {
      for (const p of peers) {
        try {
          this.channel.send(p, SYNC_CHANNEL, b);
          this.counters.batchesOut++;
        } catch (e) {
          this.counters.dropped++;
          dropLog.line(`cache sync to ${p} dropped (${(e as Error).message}); ${this.counters.dropped} dropped so far`);
        }
      }
    }
  }

  /** A message from `peer` arrived (what it forwarded before this reached us; call for its event batches too). */
  heard(peer: string): void {
    this.lastHeard.set(peer, Date.now());
  }

  /** Called every stallTickMs: a late tick means this master did not run meanwhile (see the header). */
  checkStall(now = Date.now()): void {
    if (now - this.tick > stallGapMs) {
      log.warning(`this master did not run for ${now - this.tick} ms (paused or frozen): the next pull from each peer reads its job cache from before that`);
      for (const [p, t] of this.lastHeard) {
        this.lastHeard.set(p, Math.min(t, this.tick));
        this.stallFloor.set(p, Math.min(this.stallFloor.get(p) ?? Infinity, this.tick));
      }
    }
    this.tick = now;
  }

  private onRecords(from: string, payload: Uint8Array): void {
    this.heard(from);
    this.counters.batchesIn++;
    this.mirror.apply(from, [payload]);
  }

  /** Pulls `peer`'s copy (call when its session comes up, or a partition from it heals). */
  pull(peer: string, failures = 0): void {
    const running = this.pulling.get(peer);
    if (running) {
      running.again = true;
      return;
    }
    const state: PullState = { again: false, failures };
    this.pulling.set(peer, state);
    void this.runPull(peer, state).finally(() => {
      this.pulling.delete(peer);
      if (state.again && !this.closed && state.failures < pullAttemptsMax) this.pull(peer, state.failures);
    });
  }

  private async runPull(peer: string, state: PullState): Promise<void> {
    const startedAt = Date.now();
    const last = this.lastPull.get(peer);
    const since = last === undefined ? 0 : Math.max(0, last - pullSinceSlackMs);
    const floor = this.stallFloor.get(peer);
    const jobsSince = await this.jobsSince(peer);
    let cursor: SyncCursor | null = { bank: "data" };
    let chunks = 0;
    this.counters.pulls++;
    while (cursor && !this.closed) {
      if (!this.channel.isUp(peer)) return; // pulled again when it comes back
      try {
        const reply = await this.channel.request(peer, SYNC_PULL_CHANNEL, encodePull({ cursor, since, ...(jobsSince !== undefined ? { jobsSince } : {}), nonces: true, tokens: true, v3: true }), pullRequestTimeoutMs);
        cursor = await this.mirror.applyChunk(peer, reply);
        chunks++;
        this.counters.pullChunks++;
      } catch (e) {
        this.counters.pullFailures++;
        state.failures++;
        const retry = state.failures < pullAttemptsMax;
        log.warning(`cache sync pull from ${peer} failed after ${chunks} chunk(s): ${(e as Error).message}${retry ? "; retrying" : "; giving up until its next session"}`);
        await new Promise((r) => setTimeout(r, pullRetryMs).unref());
        state.again = true;
        return;
      }
    }
    if (!cursor) {
      state.failures = 0;
      this.lastPull.set(peer, startedAt);
      if (floor !== undefined && this.stallFloor.get(peer) === floor) this.stallFloor.delete(peer);
      const jobs = jobsSince === undefined ? "" : `; jobs since ${new Date(jobsSince).toISOString()}`;
      log.info(`cache sync: pulled ${peer}'s minion data, mine, session keys, v3 marks, eauth tokens and replay nonces (${chunks} chunk(s)${since ? `, written since ${new Date(since).toISOString()}` : ""}${jobs})`);
    }
  }

  /**
   * From when to pull `peer`'s job cache: everything it forwarded since we last heard from it may be lost (a
   * peer forwards only while the session is up, and what sat in a dead session's queues is gone), less
   * pullSinceSlackMs for clock differences (jids carry the origin's clock). Nothing heard from it since this
   * master started: from our own newest job, as it was at start (0 for an empty cache). Undefined: no job cache.
   */
  private async jobsSince(peer: string): Promise<number | undefined> {
    if (!this.jobCache) return undefined;
    const heard = this.lastHeard.get(peer);
    const floor = this.stallFloor.get(peer);
    const from = heard !== undefined ? Math.min(heard, floor ?? Infinity) : ((await this.newestAtStart) ?? 0);
    return Math.max(0, from - pullSinceSlackMs);
  }

  private async sharePresence(): Promise<void> {
    if (this.sharing || this.closed || !this.presentIds) return;
    const peers = this.channel.upPeers();
    if (peers.length === 0) return;
    this.sharing = true;
    try {
      const parts = encodePresence(await this.presentIds());
      for (const p of peers) {
        for (const part of parts) {
          try {
            this.channel.send(p, PRESENCE_CHANNEL, part);
            this.counters.presenceOut++;
          } catch {
            this.counters.dropped++;
          }
        }
      }
    } catch (e) {
      log.warning(`presence for the peers failed: ${(e as Error).message}`);
    } finally {
      this.sharing = false;
    }
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    clearInterval(this.stallTimer);
    for (const off of this.offs) off();
  }
}
