/**
 * The remote addresses connected to this master's publish port, shared by every request thread through one
 * SharedArrayBuffer, so a publish does not pay a read of /proc/net/tcp (a walk of the kernel's whole connection
 * hash: milliseconds, two thirds of a publish's CPU in bench/RESULTS.md) each time it names the minions it does
 * not see connected (`not_connected` in `salt/job/<jid>/new`, src/workers/req-handler/publish.ts).
 *
 * Two ways to fill it:
 * - **Snapshots** (the zeromq transport, which cannot tell its peers' addresses): a request thread that needs the
 *   addresses and finds no usable snapshot (`snapshotVerdict`) reads the kernel's tables itself and, when it wins
 *   the board's writer lock, stores what it read with the time; other threads use that until it is too old. At
 *   most one read per `publishPeersFreshMsMax` per process while publishes come (none while none come: no timer).
 * - **Live** (a transport that knows its connections, such as brine's own ZMTP transport): the main thread
 *   feeds each connection's remote address as it comes and goes (`LivePublishPeers.connected`/`disconnected`), or
 *   the transport's whole list (`setAll`; with `brine_minion_transport: native` main.ts has the ZMTP server call `connected`/`disconnected` as subscribers come and go);
 *   no thread reads /proc then. `LivePublishPeers.close()` (the transport stops) hands back to snapshots.
 *
 * A snapshot is used only while the kernel's count of TCP sockets in use (/proc/net/sockstat: counters, ~0.2 ms
 * against the milliseconds of a connection-table walk) is what it was when it was read: a minion that connected
 * or left since changes it, so the publish reads the tables again (only a connection that came and one that went
 * in the same window go unseen). Within that, what staleness a snapshot may have (`snapshotVerdict`): Salt's
 * master computes no connected set for a publish; its CLI asks once, when its wait ends, and brine's CLI does
 * the same (`manage.present`, a fresh read). `not_connected` is brine's early word on it. A snapshot that saw a
 * matched minion connected is used for `publishPeersStaleMsMax` (a minion that left since moved the socket count;
 * for a minion of this master the CLI's own check at its end would say "[Not connected]" anyway, but a master of
 * masters above a syndic has only this word). A snapshot that would call a matched minion not connected is used
 * only when at most `publishPeersFreshMsMax` old (else read again).
 *
 * Layout: Int32 words [0] seq (seqlock: odd while writing), [1] writer lock (0 free, else the second it was taken
 * + 1, counted from [base]), [2] text length in bytes, [3] flags; Float64 at byte 16 the board's base time (ms,
 * written once before it is shared), at byte 24 the snapshot's time (ms, under the seqlock), at byte 32 the
 * kernel's TCP sockets in use when it was read (under the seqlock); from byte 48 the addresses as text, one per
 * line. A pure module: no I/O, the clock passed in.
 */

/** the addresses' text on the board, bytes (at ~16 bytes an address: ~65,000 distinct addresses) */
export const publishPeersBytesMax = 1 << 20;
/** a snapshot is used whatever it says for this long after it was read, ms */
export const publishPeersFreshMsMax = 1_000;
/** a snapshot that sees every matched minion connected is used for this long after it was read, ms */
export const publishPeersStaleMsMax = 10_000;
/** a writer lock held this long is taken over (its thread died while reading), s */
export const publishPeersLockSMax = 10;

const HEADER_BYTES = 48;
const W_SEQ = 0;
const W_LOCK = 1;
const W_LEN = 2;
const W_FLAGS = 3;
const F_SNAPSHOT = 1;
const F_LIVE = 2;
/** the last snapshot had more addresses than the board holds: it says nothing */
const F_OVERFLOW = 4;
const readRetriesMax = 1_000;

/** "use_if_all_connected": use the board's addresses if they see every matched minion connected, else read */
export type PeersVerdict = "use" | "read" | "use_if_all_connected";

/**
 * Whether a request thread may use the board's addresses or must read the kernel's tables (see the header).
 * `ageMs` is the snapshot's age (negative: the clock went back; it is read again); `socketsChanged`: the kernel's
 * count of TCP sockets in use (/proc/net/sockstat, a read of counters, not a walk of the connection hash) is not
 * what it was when the snapshot was read, so a connection may have come or gone since: read again.
 */
export function snapshotVerdict(s: { live: boolean; hasSnapshot: boolean; ageMs: number; socketsChanged: boolean }): PeersVerdict {
  if (!s.hasSnapshot) return "read";
  if (s.live) return "use";
  if (s.ageMs < 0 || s.socketsChanged) return "read";
  if (s.ageMs <= publishPeersFreshMsMax) return "use";
  return s.ageMs <= publishPeersStaleMsMax ? "use_if_all_connected" : "read";
}

/** What the board holds: the addresses (undefined when none is usable), whether they are live, and their time. */
export interface PeersView {
  addrs: ReadonlySet<string> | undefined;
  live: boolean;
  atMs: number;
  /** the kernel's TCP sockets in use when the snapshot was read (NaN: unknown) */
  sockets: number;
}

export class PublishPeersBoard {
  readonly sab: SharedArrayBuffer;
  private readonly words: Int32Array;
  private readonly floats: Float64Array;
  private readonly bytes: Uint8Array;
  private cachedSeq = -1;
  private cached: PeersView = { addrs: undefined, live: false, atMs: 0, sockets: NaN };

  /** `sab` absent: a new board (the main thread, or a thread with none shared: then it is this thread's alone) */
  constructor(sab?: SharedArrayBuffer, nowMs = Date.now()) {
    this.sab = sab ?? new SharedArrayBuffer(HEADER_BYTES + publishPeersBytesMax);
    this.words = new Int32Array(this.sab, 0, 4);
    this.floats = new Float64Array(this.sab, 16, 3);
    this.bytes = new Uint8Array(this.sab, HEADER_BYTES);
    if (!sab) this.floats[0] = nowMs;
  }

  /** The board's addresses, parsed once per write (per thread). */
  view(): PeersView {
    for (let i = 0; i < readRetriesMax; i++) {
      const s1 = Atomics.load(this.words, W_SEQ);
      if (s1 & 1) continue;
      if (s1 === this.cachedSeq) return this.cached;
      const flags = Atomics.load(this.words, W_FLAGS);
      const len = Atomics.load(this.words, W_LEN);
      const atMs = this.floats[1]!;
      const sockets = this.floats[2]!;
      const text = flags & (F_SNAPSHOT | F_LIVE) && !(flags & F_OVERFLOW) ? Buffer.from(this.bytes.subarray(0, len)).toString("latin1") : undefined;
      if (Atomics.load(this.words, W_SEQ) !== s1) continue;
      const addrs = text === undefined ? undefined : new Set(text === "" ? [] : text.split("\n"));
      this.cachedSeq = s1;
      this.cached = { addrs, live: (flags & F_LIVE) !== 0, atMs, sockets };
      return this.cached;
    }
    // a writer stalled mid-write for a thousand tries: say nothing rather than wait
    return { addrs: undefined, live: false, atMs: 0, sockets: NaN };
  }

  /** Take the writer lock (false: another thread holds it); a lock older than publishPeersLockSMax is taken over. */
  tryLock(nowMs: number): boolean {
    const stamp = Math.max(1, Math.floor((nowMs - this.floats[0]!) / 1000) + 1);
    const held = Atomics.compareExchange(this.words, W_LOCK, 0, stamp);
    if (held === 0) return true;
    if (stamp - held <= publishPeersLockSMax) return false;
    return Atomics.compareExchange(this.words, W_LOCK, held, stamp) === held;
  }

  unlock(): void {
    Atomics.store(this.words, W_LOCK, 0);
  }

  /**
   * Store a snapshot read at `atMs` (the caller holds the lock). Not stored over live addresses (a transport
   * started feeding them meanwhile): "live". "too_many": more addresses than the board holds (it then says nothing).
   */
  writeSnapshot(addrs: Iterable<string>, atMs: number, sockets = NaN): "stored" | "live" | "too_many" {
    if (Atomics.load(this.words, W_FLAGS) & F_LIVE) return "live";
    return this.write(addrs, atMs, F_SNAPSHOT, sockets) ? "stored" : "too_many";
  }

  /**
   * Store live addresses (the main thread, holding the lock), or hand back to snapshots (`addrs` undefined).
   * False: more addresses than the board holds (it then says nothing, and the threads read the tables).
   */
  writeLive(addrs: Iterable<string> | undefined, atMs: number): boolean {
    return addrs === undefined ? this.write([], 0, 0) : this.write(addrs, atMs, F_LIVE);
  }

  private write(addrs: Iterable<string>, atMs: number, flags: number, sockets = NaN): boolean {
    const text = Buffer.from([...addrs].join("\n"), "latin1");
    const fits = text.length <= this.bytes.length;
    Atomics.add(this.words, W_SEQ, 1);
    if (fits) this.bytes.set(text);
    Atomics.store(this.words, W_LEN, fits ? text.length : 0);
    this.floats[1] = atMs;
    this.floats[2] = sockets;
    Atomics.store(this.words, W_FLAGS, flags | (fits ? 0 : F_OVERFLOW));
    Atomics.add(this.words, W_SEQ, 1);
    return fits;
  }
}

/** Gap after a live feed's board write before the next, ms per address written (LivePublishPeers: 20 ms at 20,000). */
export const livePeersWriteGapMsPerAddress = 0.001;

/** An address as the kernel's tables and the grains write it: an IPv4-mapped IPv6 address as dotted IPv4. */
export function plainAddress(addr: string): string {
  return addr.startsWith("::ffff:") && addr.includes(".") ? addr.slice(7) : addr;
}

/**
 * The live feed of a transport that knows its connections (main thread): `connected(remoteAddress)` when a
 * connection to the publish port is established, `disconnected(remoteAddress)` when it ends (counted per
 * address: several connections may come from one). Changes made in one turn of the event loop are written to
 * the board once, at the next `setImmediate`; a write waits for the next turn while a request thread holds
 * the writer lock. `close()` when the transport stops: the board goes back to snapshots.
 *
 * A write rewrites every address (1.4 ms of the main thread at 20,000 addresses, 0.44 at 10,000, 0.04 at 1,000,
 * measured on a 2-vCPU EPYC), so during a connection storm a write every turn would make the storm cost O(n²): a
 * write of n addresses is followed by a gap of `n × livePeersWriteGapMsPerAddress` ms before the next (20 ms at
 * 20,000: at most 50 writes a second, ~7 % of the main thread; 10 ms at 10,000: ~4 %) when that gap is 1 ms or more;
 * with fewer than 1,000 addresses every turn's changes are written at its end, as before. One timer for the board,
 * never one per connection. (The gap follows the count, not a measured time: a write the scheduler interrupted
 * must not hold the next one back.)
 */
export class LivePublishPeers {
  private readonly counts = new Map<string, number>();
  private pending: NodeJS.Immediate | NodeJS.Timeout | undefined;
  /** the clock (`now`) reading before which no write starts */
  private nextWriteAt = -Infinity;
  private closed = false;
  /** the board holds this feed's addresses (at least one write went through) */
  private written = false;

  constructor(
    private readonly board: PublishPeersBoard,
    private readonly now: () => number = Date.now,
    /** told when the addresses do not fit the board (the threads then read the kernel's tables) */
    private readonly tooMany: (count: number) => void = () => {},
  ) {
    this.schedule();
  }

  connected(remoteAddress: string): void {
    const a = plainAddress(remoteAddress);
    this.counts.set(a, (this.counts.get(a) ?? 0) + 1);
    this.schedule();
  }

  disconnected(remoteAddress: string): void {
    const a = plainAddress(remoteAddress);
    const n = (this.counts.get(a) ?? 0) - 1;
    if (n > 0) this.counts.set(a, n);
    else this.counts.delete(a);
    this.schedule();
  }

  /**
   * Every connection's remote address at once (a transport that lists its connections rather than telling each
   * one: the caller polls it); written only when the set differs from the last one.
   */
  setAll(remoteAddresses: Iterable<string>): void {
    const counts = new Map<string, number>();
    for (const r of remoteAddresses) {
      const a = plainAddress(r);
      counts.set(a, (counts.get(a) ?? 0) + 1);
    }
    const same = counts.size === this.counts.size && [...counts.keys()].every((a) => this.counts.has(a));
    this.counts.clear();
    for (const [a, n] of counts) this.counts.set(a, n);
    if (!same || !this.written) this.schedule();
  }

  /** the addresses connected now */
  addresses(): string[] {
    return [...this.counts.keys()];
  }

  close(): void {
    this.closed = true;
    this.schedule();
  }

  private schedule(): void {
    if (this.pending) return;
    const waitMs = this.closed ? 0 : this.nextWriteAt - this.now();
    const write = () => {
      this.pending = undefined;
      const at = this.now();
      // the timer fired early by this clock (the clocks differ), or the writer lock is held: try again later
      if ((!this.closed && at < this.nextWriteAt) || !this.board.tryLock(at)) return this.schedule();
      try {
        if (!this.board.writeLive(this.closed ? undefined : this.counts.keys(), at)) this.tooMany(this.counts.size);
        this.written = true;
      } finally {
        this.board.unlock();
      }
      const gapMs = this.counts.size * livePeersWriteGapMsPerAddress;
      this.nextWriteAt = gapMs >= 1 ? at + gapMs : -Infinity;
    };
    this.pending = waitMs > 0 ? setTimeout(write, Math.ceil(waitMs)) : setImmediate(write);
    this.pending.unref();
  }
}
