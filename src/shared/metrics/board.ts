/**
 * The metrics board: one SharedArrayBuffer the main thread creates at start and hands to every request
 * worker (SharedBuffers.metrics) and runner thread (RunnerInit.metrics). Threads count into fixed slots with
 * Atomics.add; the Prometheus endpoint (exporter.ts) and `salt-run brine.stats` read it when asked. Nothing is
 * sent between threads to count, and a request costs a few Atomics.add and no allocation (bench/metrics.ts).
 *
 * Layout (Int32 words): a header, then counters of two words each, then the function-name table. A counter is
 * high × 2^30 + low: the add that takes the low word to 2^30 or past takes 2^30 off it and carries 1 into the
 * high word, so the low word stays within V8's small integers and an add allocates nothing (a BigInt64 board's
 * Atomics allocate a BigInt per call, and a Uint32 word past 2^30 comes back from Atomics.add as a heap number).
 *   - requests: per `cmd` label, REQUEST_BUCKETS_US.length + 1 bucket counts (the last is +Inf) and the sum of
 *     durations in µs; the count is the buckets' total;
 *   - `_auth` results, jobs published per `fun`, returns per `fun` × success, events per `tag_prefix`;
 *   - request lane refusals per lane × reason;
 *   - main-thread figures the main thread writes on its sampling timer (lane depth, send queues), so a runner
 *     thread reads them from here like everything else;
 *   - the `fun` table: FUN_SLOTS_DYNAMIC entries {state, length, 64 name bytes}, claimed in order with a
 *     compare-and-swap by the publish path only (empty → claiming → ready); a return looks names up, never adds.
 *
 * A counter's carry follows the subtraction from its low word by a few instructions: a reader in between sees
 * the count 2^30 too low. Exporter.ts never reports a counter below what it reported before.
 */
import {
  AUTH_RESULTS,
  BUS_DROP_REASONS,
  CMD_LABELS,
  FUN_COMPOUND,
  FUN_FIXED,
  funNameBytesMax,
  FUN_NAME_RE,
  FUN_OTHER,
  FUN_SLOTS_DYNAMIC,
  LANE_REFUSALS,
  LANES,
  REQUEST_BUCKETS_US,
  SEND_QUEUES,
  MINION_PORTS,
  PUBLISHER_COUNTS,
  NONCE_OWNER_COUNTS,
  TAG_PREFIXES,
  authSlotOf,
  tagSlotOf,
} from "./labels.js";

const MAGIC = 0x6d657472; // "metr"
const VERSION = 1;
const H_MAGIC = 0;
const H_VERSION = 1;
/** how many fun names were claimed: a thread's cache of fun lookups is valid while it is unchanged */
const H_FUN_CLAIMS = 2;
const HEADER_WORDS = 4;

const BUCKETS = REQUEST_BUCKETS_US.length + 1;
/** per cmd: the buckets, then the sum (µs) */
const REQ_STRIDE = BUCKETS + 1;
const FUN_LABELS = FUN_FIXED.length + FUN_SLOTS_DYNAMIC;

/** main-thread figures (written by the sampler, Gauge* indices) */
export const G_LANE_DEPTH = 0; // + lane
export const G_SENDQ_LENGTH = G_LANE_DEPTH + LANES.length; // + queue
export const G_SENDQ_DROPPED = G_SENDQ_LENGTH + SEND_QUEUES.length; // + queue
export const G_SAMPLED_AT_MS = G_SENDQ_DROPPED + SEND_QUEUES.length;
/** frames sent on the publish port, events put on the bus, bus readers now, bus readers dropped (+ reason) */
export const G_PUB_FRAMES = G_SAMPLED_AT_MS + 1;
export const G_BUS_EVENTS = G_PUB_FRAMES + 1;
export const G_BUS_READERS = G_BUS_EVENTS + 1;
export const G_BUS_DROPPED = G_BUS_READERS + 1; // + reason
/** sign-ins sent again that the request port answered with their first copy's reply (main-thread/sign-in-replies.ts) */
export const G_SIGNINS_RESENT = G_BUS_DROPPED + BUS_DROP_REASONS.length;
/** connections each minion-facing port closed for not finishing their ZMTP handshake in time (+ port, MINION_PORTS) */
export const G_HANDSHAKE_TIMEOUTS = G_SIGNINS_RESENT + 1;
/** the publisher thread's totals (+ PUBLISHER_COUNTS index): sealed, signed, a peer's frames passed or refused, dropped */
export const G_PUBLISHER = G_HANDSHAKE_TIMEOUTS + MINION_PORTS.length;
/** the nonce owner check's totals (+ NONCE_OWNER_COUNTS index), clustered masters only */
export const G_NONCE_OWNER = G_PUBLISHER + PUBLISHER_COUNTS.length;
const GAUGES = G_NONCE_OWNER + NONCE_OWNER_COUNTS.length;

// counter indices (each counter is two words)
const C_REQ = 0;
const C_AUTH = C_REQ + CMD_LABELS.length * REQ_STRIDE;
const C_PUB = C_AUTH + AUTH_RESULTS.length;
const C_DONE = C_PUB + FUN_LABELS; // + fun * 2 + success
const C_EVT = C_DONE + FUN_LABELS * 2;
const C_LANE_REFUSED = C_EVT + TAG_PREFIXES.length; // + lane * refusals + reason
const C_GAUGE = C_LANE_REFUSED + LANES.length * LANE_REFUSALS.length;
const COUNTERS = C_GAUGE + GAUGES;

const FUN_ENTRY_WORDS = 2 + funNameBytesMax / 4;
const FUN_TABLE_WORD = HEADER_WORDS + COUNTERS * 2;
const TOTAL_WORDS = FUN_TABLE_WORD + FUN_SLOTS_DYNAMIC * FUN_ENTRY_WORDS;
const FUN_EMPTY = 0;
const FUN_CLAIMING = 1;
const FUN_READY = 2;
/** a counter's high word counts units of this */
const CARRY = 2 ** 30;
/** largest amount one Atomics.add adds (a larger one is added in parts), so the low word stays far from 2^31 */
const addPartMax = 2 ** 24;
/** spins waiting for another thread to finish writing a name it claimed (a few stores) before giving up */
const funClaimSpinsMax = 100_000;
/** a thread's cache of looked-up names (negative answers included) is cleared past this many entries */
const funCacheEntriesMax = 1024;

/** Bytes of a board. */
export const METRICS_BOARD_BYTES = TOTAL_WORDS * 4;

/** A fresh board (the main thread, at start). */
export function createMetricsBoard(): SharedArrayBuffer {
  const sab = new SharedArrayBuffer(METRICS_BOARD_BYTES);
  const u = new Int32Array(sab);
  u[H_MAGIC] = MAGIC;
  u[H_VERSION] = VERSION;
  return sab;
}

/** What a board holds at one moment (every count since the master started). */
export interface BoardSnapshot {
  /** commands with at least one request: bucket counts (not cumulative; the last is +Inf), sum in µs */
  requests: { cmd: string; buckets: number[]; sumUs: number; count: number }[];
  auth: { result: string; n: number }[];
  published: { fun: string; n: number }[];
  completed: { fun: string; success: boolean; n: number }[];
  events: { tagPrefix: string; n: number }[];
  laneRefused: { lane: string; reason: string; n: number }[];
  laneDepth: { lane: string; n: number }[];
  sendQueues: { queue: string; length: number; dropped: number }[];
  /** frames sent on the publish port (sampled every second) */
  publishFrames: number;
  /** the event bus: events published, readers connected, readers disconnected for not reading (by reason) */
  bus: { events: number; readers: number; dropped: { reason: string; n: number }[] };
  /** when the main thread last wrote its figures (ms since the epoch; 0: never) */
  sampledAtMs: number;
  /** sign-ins sent again and answered with their first copy's reply, without work (sampled every second) */
  signInsResent: number;
  /** per minion-facing port: connections closed for not finishing their ZMTP handshake in time (sampled every second) */
  handshakeTimeouts: { port: string; n: number }[];
  /** the publisher thread's totals by PUBLISHER_COUNTS (sampled every second) */
  publisher: { what: string; n: number }[];
  /** the nonce owner check's totals by NONCE_OWNER_COUNTS (clustered; sampled every second) */
  nonceOwner: { what: string; n: number }[];
}

export class MetricsBoard {
  readonly sab: SharedArrayBuffer;
  private readonly u32: Int32Array;
  private readonly u8: Uint8Array;
  /** this thread's fun name → label slot, valid while the claim count is `funCacheClaims` */
  private readonly funCache = new Map<string, number>();
  private funCacheClaims = -1;

  /** Over a board from createMetricsBoard(); without one, a private board (a thread nobody reads, tests). */
  constructor(sab: SharedArrayBuffer = createMetricsBoard()) {
    if (sab.byteLength !== METRICS_BOARD_BYTES) throw new Error(`metrics board: ${sab.byteLength} bytes, expected ${METRICS_BOARD_BYTES}`);
    const u = new Int32Array(sab);
    if (u[H_MAGIC] !== MAGIC || u[H_VERSION] !== VERSION) throw new Error("metrics board: not a board of this version");
    this.sab = sab;
    this.u32 = u;
    this.u8 = new Uint8Array(sab);
  }

  // --- counting (any thread) --------------------------------------------------------------------------------

  /** Adds `n` (an integer ≥ 0) to counter `c`; the add that takes the low word to CARRY carries. */
  private add(c: number, n: number): void {
    const i = HEADER_WORDS + c * 2;
    while (n > addPartMax) {
      this.add(c, addPartMax);
      n -= addPartMax;
    }
    const old = Atomics.add(this.u32, i, n);
    if (old < CARRY && old + n >= CARRY) {
      Atomics.sub(this.u32, i, CARRY);
      Atomics.add(this.u32, i + 1, 1);
    }
  }

  /** One request handled: its command slot (labels.ts cmdSlotOf) and how long it took, µs (an integer). */
  request(cmd: number, micros: number): void {
    if (micros < 0) micros = 0x7fffffff; // a 32-bit wrap of a request over 35 minutes
    let b = 0;
    while (b < REQUEST_BUCKETS_US.length && micros > REQUEST_BUCKETS_US[b]!) b++;
    const base = C_REQ + cmd * REQ_STRIDE;
    this.add(base + b, 1);
    if (micros > 0) this.add(base + BUCKETS, micros);
  }

  /** One `_auth` answered, by Salt's `act` word (labels.ts AUTH_RESULTS). */
  auth(act: string): void {
    this.add(C_AUTH + authSlotOf(act), 1);
  }

  /** One job published: its `fun` (a name takes a table slot at its first publish, while slots are left). */
  jobPublished(fun: unknown): void {
    this.add(C_PUB + this.funSlot(fun, true), 1);
  }

  /** One return stored: its `fun` (counted by name only when a publish named it) and its success. */
  jobCompleted(fun: unknown, success: boolean): void {
    this.add(C_DONE + this.funSlot(fun, false) * 2 + (success ? 1 : 0), 1);
  }

  /** One event fired by this master, by its tag's prefix (labels.ts tagSlotOf). */
  eventFired(tag: string): void {
    this.add(C_EVT + tagSlotOf(tag), 1);
  }

  /** `n` frames a lane answered without work (lane index into LANES, reason into LANE_REFUSALS). */
  laneRefused(lane: number, reason: number, n = 1): void {
    this.add(C_LANE_REFUSED + lane * LANE_REFUSALS.length + reason, n);
  }

  /** A main-thread figure (G_* index); only the main thread's sampler writes these. */
  setGauge(g: number, value: number): void {
    const i = HEADER_WORDS + (C_GAUGE + g) * 2;
    const v = Math.max(0, Math.floor(value));
    Atomics.store(this.u32, i, 0);
    Atomics.store(this.u32, i + 1, Math.floor(v / CARRY));
    Atomics.store(this.u32, i, v % CARRY);
  }

  // --- the fun table ----------------------------------------------------------------------------------------

  /** The label slot of a job's `fun`: a name in the table, `compound` for a list, else `other`. */
  funSlot(fun: unknown, claim: boolean): number {
    if (typeof fun !== "string") return Array.isArray(fun) ? FUN_COMPOUND : FUN_OTHER;
    const claims = Atomics.load(this.u32, H_FUN_CLAIMS);
    if (claims !== this.funCacheClaims || this.funCache.size >= funCacheEntriesMax) {
      this.funCache.clear();
      this.funCacheClaims = claims;
    }
    const hit = this.funCache.get(fun);
    if (hit !== undefined && (hit !== FUN_OTHER || !claim)) return hit;
    const slot = this.findFun(fun, claim && FUN_NAME_RE.test(fun));
    // a claim changed the count: the cache restarts at the next call
    this.funCache.set(fun, slot);
    return slot;
  }

  private entryWord(t: number): number {
    return FUN_TABLE_WORD + t * FUN_ENTRY_WORDS;
  }

  private entryIs(t: number, name: string): boolean {
    const w = this.entryWord(t);
    if (Atomics.load(this.u32, w + 1) !== name.length) return false;
    const at = (w + 2) * 4;
    for (let k = 0; k < name.length; k++) if (this.u8[at + k] !== name.charCodeAt(k)) return false;
    return true;
  }

  /** Scans the table in claim order; with `claim`, takes the first empty entry for `name`. */
  private findFun(name: string, claim: boolean): number {
    for (let t = 0; t < FUN_SLOTS_DYNAMIC; t++) {
      const w = this.entryWord(t);
      let state = Atomics.load(this.u32, w);
      if (state === FUN_EMPTY) {
        if (!claim) return FUN_OTHER; // entries fill in order: the name is not further on
        if (Atomics.compareExchange(this.u32, w, FUN_EMPTY, FUN_CLAIMING) === FUN_EMPTY) {
          const at = (w + 2) * 4;
          for (let k = 0; k < name.length; k++) this.u8[at + k] = name.charCodeAt(k);
          Atomics.store(this.u32, w + 1, name.length);
          Atomics.store(this.u32, w, FUN_READY);
          Atomics.add(this.u32, H_FUN_CLAIMS, 1);
          return FUN_FIXED.length + t;
        }
        state = Atomics.load(this.u32, w);
      }
      // another thread is writing this entry's name: it is a few stores away from ready
      for (let spin = 0; state === FUN_CLAIMING && spin < funClaimSpinsMax; spin++) state = Atomics.load(this.u32, w);
      if (state !== FUN_READY) return FUN_OTHER;
      if (this.entryIs(t, name)) return FUN_FIXED.length + t;
    }
    return FUN_OTHER;
  }

  private funName(slot: number): string {
    if (slot < FUN_FIXED.length) return FUN_FIXED[slot]!;
    const w = this.entryWord(slot - FUN_FIXED.length);
    const len = Atomics.load(this.u32, w + 1);
    return String.fromCharCode(...this.u8.subarray((w + 2) * 4, (w + 2) * 4 + len));
  }

  private funReady(slot: number): boolean {
    return slot < FUN_FIXED.length || Atomics.load(this.u32, this.entryWord(slot - FUN_FIXED.length)) === FUN_READY;
  }

  // --- reading (exporter, brine.stats) ----------------------------------------------------------------------

  /** Counter `c`'s value: the high word read before and after the low one, again if it moved. */
  private get(c: number): number {
    const i = HEADER_WORDS + c * 2;
    for (;;) {
      const hi = Atomics.load(this.u32, i + 1);
      const lo = Atomics.load(this.u32, i);
      if (Atomics.load(this.u32, i + 1) === hi) return hi * CARRY + lo;
    }
  }

  read(): BoardSnapshot {
    const requests: BoardSnapshot["requests"] = [];
    CMD_LABELS.forEach((cmd, s) => {
      const base = C_REQ + s * REQ_STRIDE;
      const buckets = Array.from({ length: BUCKETS }, (_, b) => this.get(base + b));
      const count = buckets.reduce((a, b) => a + b, 0);
      if (count > 0) requests.push({ cmd, buckets, sumUs: this.get(base + BUCKETS), count });
    });
    const published: BoardSnapshot["published"] = [];
    const completed: BoardSnapshot["completed"] = [];
    for (let f = 0; f < FUN_LABELS; f++) {
      if (!this.funReady(f)) continue;
      const pub = this.get(C_PUB + f);
      const failed = this.get(C_DONE + f * 2);
      const ok = this.get(C_DONE + f * 2 + 1);
      if (pub + failed + ok === 0) continue;
      const fun = this.funName(f);
      if (pub) published.push({ fun, n: pub });
      if (ok) completed.push({ fun, success: true, n: ok });
      if (failed) completed.push({ fun, success: false, n: failed });
    }
    return {
      requests,
      auth: AUTH_RESULTS.map((result, s) => ({ result, n: this.get(C_AUTH + s) })),
      published,
      completed,
      events: TAG_PREFIXES.map((tagPrefix, s) => ({ tagPrefix, n: this.get(C_EVT + s) })).filter((e) => e.n > 0),
      laneRefused: LANES.flatMap((lane, l) => LANE_REFUSALS.map((reason, r) => ({ lane, reason, n: this.get(C_LANE_REFUSED + l * LANE_REFUSALS.length + r) }))),
      laneDepth: LANES.map((lane, l) => ({ lane, n: this.get(C_GAUGE + G_LANE_DEPTH + l) })),
      sendQueues: SEND_QUEUES.map((queue, q) => ({ queue, length: this.get(C_GAUGE + G_SENDQ_LENGTH + q), dropped: this.get(C_GAUGE + G_SENDQ_DROPPED + q) })),
      publishFrames: this.get(C_GAUGE + G_PUB_FRAMES),
      bus: {
        events: this.get(C_GAUGE + G_BUS_EVENTS),
        readers: this.get(C_GAUGE + G_BUS_READERS),
        dropped: BUS_DROP_REASONS.map((reason, r) => ({ reason, n: this.get(C_GAUGE + G_BUS_DROPPED + r) })),
      },
      sampledAtMs: this.get(C_GAUGE + G_SAMPLED_AT_MS),
      signInsResent: this.get(C_GAUGE + G_SIGNINS_RESENT),
      handshakeTimeouts: MINION_PORTS.map((port, p) => ({ port, n: this.get(C_GAUGE + G_HANDSHAKE_TIMEOUTS + p) })),
      publisher: PUBLISHER_COUNTS.map((what, i) => ({ what, n: this.get(C_GAUGE + G_PUBLISHER + i) })),
      nonceOwner: NONCE_OWNER_COUNTS.map((what, i) => ({ what, n: this.get(C_GAUGE + G_NONCE_OWNER + i) })),
    };
  }
}
