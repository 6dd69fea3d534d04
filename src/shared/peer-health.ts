/**
 * Peer liveness as the peer channel sees it (its events reach the main thread through PeerChannelProxy), shared with runner threads through one small
 * SharedArrayBuffer (written by the main thread only, read by `cluster.members`): which masters have an
 * established session, which are down and since when. A voter counts as unhealthy once its session has been
 * down for `unhealthyAfterMs` (or was never up since this master started and that long has passed). A joining
 * master also says here what its promotion waits for (readiness: a learner mid-transfer is not ready).
 *
 * Layout: Int32 [0] seq (seqlock: odd while writing), [1] byte length, then UTF-8 JSON of HealthBoard.
 */

const HEADER_BYTES = 8;
/** bytes of the JSON board; 64 peers with 128-byte ids fit several times over */
export const healthBoardBytes = 64 * 1024;
const readRetriesMax = 10_000;

export interface PeerHealthEntry {
  up: boolean;
  /** ms since the epoch of the last change (or of the start for a peer never seen) */
  since: number;
}

export interface HealthBoard {
  updatedAt: number;
  startedAt: number;
  peers: Record<string, PeerHealthEntry>;
  /** while a joining master waits for its promotion: what it waits for (its state-sync before promotion) */
  joining?: string;
}

export function createHealthBuffer(): SharedArrayBuffer {
  return new SharedArrayBuffer(HEADER_BYTES + healthBoardBytes);
}

export class HealthWriter {
  private readonly words: Int32Array;
  private readonly bytes: Uint8Array;
  readonly board: HealthBoard;

  constructor(readonly sab: SharedArrayBuffer, now = Date.now()) {
    this.words = new Int32Array(sab, 0, 2);
    this.bytes = new Uint8Array(sab, HEADER_BYTES);
    this.board = { updatedAt: now, startedAt: now, peers: {} };
    this.flush();
  }

  set(id: string, up: boolean, now = Date.now()): void {
    const cur = this.board.peers[id];
    if (cur && cur.up === up) return;
    this.board.peers[id] = { up, since: now };
    this.board.updatedAt = now;
    this.flush();
  }

  /** What this joining master waits for before its promotion; undefined once promoted (or not joining). */
  setJoining(why: string | undefined, now = Date.now()): void {
    if (this.board.joining === why) return;
    if (why === undefined) delete this.board.joining;
    else this.board.joining = why;
    this.board.updatedAt = now;
    this.flush();
  }

  private flush(): void {
    const enc = new TextEncoder().encode(JSON.stringify(this.board));
    if (enc.length > this.bytes.length) return; // cannot happen within the peer bound; keep the last board
    Atomics.add(this.words, 0, 1);
    this.bytes.set(enc);
    Atomics.store(this.words, 1, enc.length);
    Atomics.add(this.words, 0, 1);
  }
}

export function readHealth(sab: SharedArrayBuffer): HealthBoard | undefined {
  const words = new Int32Array(sab, 0, 2);
  const bytes = new Uint8Array(sab, HEADER_BYTES);
  for (let i = 0; i < readRetriesMax; i++) {
    const s1 = Atomics.load(words, 0);
    if (s1 & 1) continue;
    const len = Atomics.load(words, 1);
    const copy = bytes.slice(0, len);
    if (Atomics.load(words, 0) !== s1) continue;
    try {
      return JSON.parse(new TextDecoder().decode(copy)) as HealthBoard;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** Voters (other than `self`) whose session is down for at least `unhealthyAfterMs`, sorted. */
export function unhealthyVoters(board: HealthBoard | undefined, voters: readonly string[], self: string, unhealthyAfterMs: number, now = Date.now()): string[] {
  if (!board) return [];
  const out: string[] = [];
  for (const v of voters) {
    if (v === self) continue;
    const e = board.peers[v];
    const downSince = e ? (e.up ? undefined : e.since) : board.startedAt;
    if (downSince !== undefined && now - downSince >= unhealthyAfterMs) out.push(v);
  }
  return out.sort();
}
