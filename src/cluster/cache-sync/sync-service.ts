/**
 * Cache sync on the main thread (with `cluster_id`): what Salt shared through a shared `cachedir` (the minion
 * data cache, the mine, session keys) and what it read with `ss` (connected minions), brine shares over the
 * peer channel. The main thread only moves bytes: records are encoded by the request worker that wrote them
 * and decoded and stored by the mirror thread (mirror.ts).
 *
 * - **Live** (`cl/sync`, one-way): each batch of records a request worker produced goes once to every peer with
 *   a session, as is; a peer's mirror thread stores the newer ones (records.ts). Received records are never
 *   sent on. A session key reaches the peers in the same turn as the auth reply that carries it is written.
 * - **Bulk** (`cl/sync-pull`, request/response): when a session to a peer comes up (a master started, came
 *   back, or a partition healed), this master pulls the peer's copy in chunks (sync-store.ts: at most
 *   SYNC_CHUNK_IDS_MAX minions, about SYNC_CHUNK_BYTES_MAX), one chunk in flight per peer, so a master that
 *   missed writes while it was away gets them. After a completed pull, the next one from that peer asks only
 *   for what was written since (less PULL_SINCE_SLACK_MS for clock differences).
 * - **Presence** (`cl/presence`, one-way): every PRESENCE_SHARE_MS the minions this master sees connected go to
 *   every peer (presence-board.ts), so "[Not connected]" and manage.present answer for the whole cluster.
 */
import { getLogger } from "../../log.js";
import { PRESENCE_SHARE_MS } from "../../master/presence.js";
import type { MirrorThread } from "../mirror.js";
import { encodePresence } from "./presence-board.js";
import { encodePull, type SyncCursor } from "./sync-store.js";

const log = getLogger("brine.cluster.sync");

export const SYNC_CHANNEL = "cl/sync";
export const SYNC_PULL_CHANNEL = "cl/sync-pull";
export const PRESENCE_CHANNEL = "cl/presence";
/** one pull request, ms */
export const PULL_REQUEST_TIMEOUT_MS = 30_000;
/** a later pull from the same peer re-reads this much before the last completed one (clock differences), ms */
export const PULL_SINCE_SLACK_MS = 5 * 60_000;
/** wait before retrying a pull that failed while the peer is still up, ms */
const PULL_RETRY_MS = 2_000;
/** pulls tried in a row after failures before giving up until the next session or heal, count */
const PULL_ATTEMPTS_MAX = 5;

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
  private timer: NodeJS.Timeout | undefined;
  private sharing = false;
  private closed = false;
  private dropLogs = 0;

  constructor(
    private readonly channel: SyncChannel,
    private readonly mirror: MirrorThread,
    private readonly presentIds?: () => Promise<string[]>,
  ) {
    this.offs.push(channel.on(SYNC_CHANNEL, (m) => this.onRecords(m.from, m.payload)));
    this.offs.push(channel.on(SYNC_PULL_CHANNEL, (m) => this.mirror.serve(m.payload)));
    this.offs.push(channel.on(PRESENCE_CHANNEL, (m) => this.mirror.presence(m.from, m.payload)));
    if (presentIds) {
      this.timer = setInterval(() => void this.sharePresence(), PRESENCE_SHARE_MS);
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
          if (this.dropLogs++ % 1000 === 0) log.warning(`cache sync to ${p} dropped (${(e as Error).message}); ${this.counters.dropped} dropped so far`);
        }
      }
    }
  }

  private onRecords(from: string, payload: Uint8Array): void {
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
      if (state.again && !this.closed && state.failures < PULL_ATTEMPTS_MAX) this.pull(peer, state.failures);
    });
  }

  private async runPull(peer: string, state: PullState): Promise<void> {
    const startedAt = Date.now();
    const last = this.lastPull.get(peer);
    const since = last === undefined ? 0 : Math.max(0, last - PULL_SINCE_SLACK_MS);
    let cursor: SyncCursor | null = { bank: "data" };
    let chunks = 0;
    this.counters.pulls++;
    while (cursor && !this.closed) {
      if (!this.channel.isUp(peer)) return; // pulled again when it comes back
      try {
        const reply = await this.channel.request(peer, SYNC_PULL_CHANNEL, encodePull({ cursor, since }), PULL_REQUEST_TIMEOUT_MS);
        cursor = await this.mirror.applyChunk(peer, reply);
        chunks++;
        this.counters.pullChunks++;
      } catch (e) {
        this.counters.pullFailures++;
        state.failures++;
        const retry = state.failures < PULL_ATTEMPTS_MAX;
        log.warning(`cache sync pull from ${peer} failed after ${chunks} chunk(s): ${(e as Error).message}${retry ? "; retrying" : "; giving up until its next session"}`);
        await new Promise((r) => setTimeout(r, PULL_RETRY_MS).unref());
        state.again = true;
        return;
      }
    }
    if (!cursor) {
      state.failures = 0;
      this.lastPull.set(peer, startedAt);
      log.info(`cache sync: pulled ${peer}'s minion data, mine and session keys (${chunks} chunk(s)${since ? `, written since ${new Date(since).toISOString()}` : ""})`);
    }
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
    for (const off of this.offs) off();
  }
}
