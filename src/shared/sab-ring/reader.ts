/**
 * RingReader: answers ownership questions from the shared ring buffer, in any thread, without locks.
 *
 * Every answer comes from one consistent copy of one ring (the latch in layout.ts): the reader loads the
 * ring's seq word, uses the copy it selects, and re-loads seq after its last byte; if seq moved, a write
 * began meanwhile and the read is retried. Decoded node tables are cached per ring keyed by the seq value they
 * were read at, so the hot path (owner/owns/ownsFor) is: hash the key, one Map lookup, three Atomics loads.
 *
 * Salt semantics kept on purpose (salt-cluster.md §3):
 * - owner() of an empty or absent ring is null;
 * - owns() on an empty or absent ring is true (an unclustered master owns everything); on a one-node ring it
 *   is "is it that node"; otherwise "is it the owner";
 * - replicas() lists distinct nodes, owner first, capped at the ring size.
 * The ownsFor gate follows Salt's owns_for, with two deliberate differences: a master that is not a member of
 * the routed ring counts `not_a_member` even when the ring exists and is non-empty (Salt counted that case as
 * `other_ring_member`, which hid a misrouted load balancer behind the "expected sharding" counter); and with
 * the ring's `replicas` R > 1 each of the key's first R nodes owns it (Salt's gate ignored replicas).
 */
import { BrineError } from "../errors.js";
import { preferenceOrder } from "./assign.js";
import { hashString, nodeHash } from "./hash.js";
import {
  C,
  CLUSTER_RING,
  H,
  NO_OWNER,
  R,
  RING_ACTIVE,
  ROUTE_TO_RING,
  counterIndex,
  loadString,
  readLayout,
  ringCopyByte,
  ringReadRetriesMax,
  ringSeqByte,
  ringSlots,
  routeRowByte,
  routesCopyByte,
  type RingLayout,
} from "./layout.js";

const SLOT_MASK = ringSlots - 1;

/** A consistent picture of one ring at one epoch (a copy: safe to keep). */
export interface RingView {
  readonly ring: string;
  readonly epoch: number;
  /** sorted node ids; `owners` index into this list */
  readonly nodes: readonly string[];
  readonly replicas: number;
  /** tableChecksum() of nodes + owners, as computed by the writer */
  readonly checksum: number;
  readonly owners: Uint8Array;
}

/** Why the gate said what it said. Only the last two are "no". */
export type GateVerdict = "broadcast" | "owner" | "not_a_member" | "other_ring_member";

/** drop_stats() shape, as Salt's ring_membership.drop_stats(). */
export type DropStats = Record<string, { ring_id: string | null; not_a_member: number; other_ring_member: number }>;

/** One ring record decoded at seq value `seq`. Immutable once built; shared by every call that hits it. */
interface Decoded {
  readonly seqIndex: number;
  readonly seq: number;
  readonly active: boolean;
  readonly name: string;
  readonly epoch: number;
  readonly nodes: readonly string[];
  readonly nodeIndex: ReadonlyMap<string, number>;
  readonly hashes: readonly number[];
  readonly replicas: number;
  readonly checksum: number;
  /** absolute byte offset of the slot owners in the copy `seq` selects */
  readonly slotsByte: number;
}

interface RouteEntry {
  readonly state: number;
  readonly ring: string;
  readonly row: number;
}

interface DecodedRoutes {
  readonly seq: number;
  readonly byType: ReadonlyMap<string, RouteEntry>;
  readonly rows: readonly { dataType: string; ring: string; state: number }[];
}

/** `locate` result for a ring that is not published. */
const ABSENT = Symbol("absent");
/** Name hints kept per reader; above this the map is cleared (callers asking for arbitrary names). */
const hintsMax = 256;

export class RingReader {
  private readonly layout: RingLayout;
  private readonly i32: Int32Array;
  private readonly u8: Uint8Array;
  private readonly i64: BigInt64Array;
  private readonly scratch: Uint8Array;
  private readonly cache: (Decoded | undefined)[];
  private readonly hints = new Map<string, number>();
  private routesCache: DecodedRoutes | undefined;
  /** Reads discarded because a write began during them. Diagnostic, per reader. */
  retries = 0;

  /**
   * `readRetriesMax`: attempts per read before RING_TORN_READ (default ringReadRetriesMax). Every failed
   * attempt means a write *started* during it, so hitting the bound means the writer never paused.
   */
  constructor(
    sab: SharedArrayBuffer,
    private readonly readRetriesMax: number = ringReadRetriesMax,
  ) {
    if (!Number.isSafeInteger(readRetriesMax) || readRetriesMax < 1) throw new BrineError("RING_BAD_QUERY", `readRetriesMax ${readRetriesMax}`);
    this.layout = readLayout(sab);
    this.i32 = new Int32Array(sab);
    this.u8 = new Uint8Array(sab);
    this.i64 = new BigInt64Array(sab);
    const l = this.layout.limits;
    this.scratch = new Uint8Array(Math.max(l.nodeIdBytesMax, l.ringNameBytesMax, l.dataTypeBytesMax));
    this.cache = new Array<Decoded | undefined>(l.ringsMax).fill(undefined);
  }

  /** The node owning `key` in `ring`, or null when the ring is empty or not published here. */
  owner(key: string, ring: string = CLUSTER_RING): string | null {
    const slot = hashString(key) & SLOT_MASK;
    for (let attempt = 0; attempt < this.readRetriesMax; attempt++) {
      const d = this.locate(ring);
      if (d === ABSENT) return null;
      if (d !== null) {
        const o = Atomics.load(this.u8, d.slotsByte + slot);
        if (Atomics.load(this.i32, d.seqIndex) === d.seq) return o === NO_OWNER ? null : (d.nodes[o] ?? null);
      }
      this.retries++;
    }
    throw this.tornRead(ring);
  }

  /** Salt's HashRing.owns: true on an empty/absent ring, else whether `node` owns `key`. */
  owns(key: string, node: string, ring: string = CLUSTER_RING): boolean {
    const slot = hashString(key) & SLOT_MASK;
    for (let attempt = 0; attempt < this.readRetriesMax; attempt++) {
      const d = this.locate(ring);
      if (d === ABSENT) return true;
      if (d !== null) {
        if (d.nodes.length <= 1) return d.nodes.length === 0 || d.nodes[0] === node;
        const o = Atomics.load(this.u8, d.slotsByte + slot);
        if (Atomics.load(this.i32, d.seqIndex) === d.seq) return d.nodes[o] === node;
      }
      this.retries++;
    }
    throw this.tornRead(ring);
  }

  /**
   * Up to `n` distinct nodes for `key`, the owner first, then rendezvous order. `n` defaults to the ring's
   * configured replicas and is capped at the ring size; an empty or absent ring gives [].
   */
  replicas(key: string, n?: number, ring: string = CLUSTER_RING): string[] {
    if (n !== undefined && (!Number.isSafeInteger(n) || n < 0)) throw new BrineError("RING_BAD_QUERY", `n=${n}`);
    const slot = hashString(key) & SLOT_MASK;
    for (let attempt = 0; attempt < this.readRetriesMax; attempt++) {
      const d = this.locate(ring);
      if (d === ABSENT) return [];
      if (d !== null) {
        const o = d.nodes.length === 0 ? NO_OWNER : Atomics.load(this.u8, d.slotsByte + slot);
        if (Atomics.load(this.i32, d.seqIndex) === d.seq) {
          const want = Math.min(n ?? d.replicas, d.nodes.length);
          if (want === 0) return [];
          return preferenceOrder(d.nodes, d.hashes, o, slot)
            .slice(0, want)
            .map((i) => d.nodes[i]!);
        }
      }
      this.retries++;
    }
    throw this.tornRead(ring);
  }

  /** Sorted node ids of `ring` ([] when empty or absent). */
  nodes(ring: string = CLUSTER_RING): string[] {
    const d = this.consistent(ring);
    return d === ABSENT ? [] : [...d.nodes];
  }

  /** The ring's epoch, or -1 when it is not published here. */
  epoch(ring: string = CLUSTER_RING): number {
    const d = this.consistent(ring);
    return d === ABSENT ? -1 : d.epoch;
  }

  /** Names of every published ring, sorted. */
  rings(): string[] {
    const out: string[] = [];
    for (let r = 0; r < this.layout.limits.ringsMax; r++) {
      const d = this.stable(r);
      if (d.active) out.push(d.name);
    }
    return out.sort();
  }

  /** A consistent copy of the whole ring (table included), or null when it is not published. */
  view(ring: string = CLUSTER_RING): RingView | null {
    for (let attempt = 0; attempt < this.readRetriesMax; attempt++) {
      const d = this.locate(ring);
      if (d === ABSENT) return null;
      if (d !== null) {
        const owners = new Uint8Array(ringSlots);
        for (let s = 0; s < ringSlots; s++) owners[s] = Atomics.load(this.u8, d.slotsByte + s);
        if (Atomics.load(this.i32, d.seqIndex) === d.seq) {
          return { ring, epoch: d.epoch, nodes: [...d.nodes], replicas: d.replicas, checksum: d.checksum, owners };
        }
      }
      this.retries++;
    }
    throw this.tornRead(ring);
  }

  /**
   * The owns_for gate for one write of `dataType` keyed by `key`, on the master whose node id is `self`.
   * No route (or a route to None) means broadcast. Every "no" increments that data type's counter in the
   * shared buffer with Atomics.add, so counts from all threads add up exactly.
   */
  gate(dataType: string, key: string, self: string): GateVerdict {
    const route = this.routesNow().byType.get(dataType);
    if (route === undefined || route.state !== ROUTE_TO_RING) return "broadcast";
    const verdict = this.memberVerdict(route.ring, hashString(key) & SLOT_MASK, self);
    if (verdict === "not_a_member") Atomics.add(this.i64, counterIndex(this.layout, route.row), 1n);
    else if (verdict === "other_ring_member") Atomics.add(this.i64, counterIndex(this.layout, route.row) + 1, 1n);
    return verdict;
  }

  /** Salt's owns_for(opts, data_type, key): true to write locally. */
  ownsFor(dataType: string, key: string, self: string): boolean {
    const v = this.gate(dataType, key, self);
    return v === "broadcast" || v === "owner";
  }

  /** The ring `dataType` is routed to now, null for broadcast (no route, or a route to None). */
  route(dataType: string): string | null {
    const r = this.routesNow().byType.get(dataType);
    return r !== undefined && r.state === ROUTE_TO_RING ? r.ring : null;
  }

  /** The live routing table in the buffer: data type -> ring, null for broadcast. */
  routes(): Record<string, string | null> {
    const out: Record<string, string | null> = {};
    for (const row of this.routesNow().rows) out[row.dataType] = row.state === ROUTE_TO_RING ? row.ring : null;
    return out;
  }

  /**
   * Salt's drop_stats(): {data_type: {ring_id, not_a_member, other_ring_member}} for every data type with at
   * least one drop, read live from the shared counters (so every thread, runners included, sees the same
   * totals). ring_id is the ring the type is routed to now, or was last routed to.
   */
  dropStats(): DropStats {
    const out: DropStats = {};
    this.routesNow().rows.forEach((row, i) => {
      const at = counterIndex(this.layout, i);
      const notMember = Number(Atomics.load(this.i64, at));
      const other = Number(Atomics.load(this.i64, at + 1));
      if (notMember === 0 && other === 0) return;
      out[row.dataType] = { ring_id: row.ring === "" ? null : row.ring, not_a_member: notMember, other_ring_member: other };
    });
    return out;
  }

  // --- internals -------------------------------------------------------------------------------------------

  private tornRead(what: string): BrineError {
    return new BrineError("RING_TORN_READ", `${what}: ${this.readRetriesMax} attempts`);
  }

  /** Membership and ownership of `slot` for `self`, both from the same consistent copy of `ring`. */
  private memberVerdict(ring: string, slot: number, self: string): GateVerdict {
    for (let attempt = 0; attempt < this.readRetriesMax; attempt++) {
      const d = this.locate(ring);
      if (d === ABSENT) return "not_a_member";
      if (d !== null) {
        if (d.nodes.length === 0 || !d.nodeIndex.has(self)) return "not_a_member";
        const o = Atomics.load(this.u8, d.slotsByte + slot);
        // with replicas R, the key's first R nodes (owner first, then rendezvous order) all own it
        const owns = d.nodes[o] === self || (d.replicas > 1 && o !== NO_OWNER && preferenceOrder(d.nodes, d.hashes, o, slot).slice(0, d.replicas).includes(d.nodeIndex.get(self)!));
        if (Atomics.load(this.i32, d.seqIndex) === d.seq) return owns ? "owner" : "other_ring_member";
      }
      this.retries++;
    }
    throw this.tornRead(ring);
  }

  /**
   * The decoded record currently holding `ring`, valid for the seq value it carries; null when a write raced
   * the decode (caller retries); ABSENT when no record holds the ring.
   */
  private locate(ring: string): Decoded | null | typeof ABSENT {
    const hint = this.hints.get(ring);
    if (hint !== undefined) {
      const d = this.current(hint);
      if (d === null) return null;
      if (d.active && d.name === ring) return d;
      this.hints.delete(ring);
    }
    for (let r = 0; r < this.layout.limits.ringsMax; r++) {
      const d = this.current(r);
      if (d === null) return null;
      if (d.active && d.name === ring) {
        if (this.hints.size >= hintsMax) this.hints.clear();
        this.hints.set(ring, r);
        return d;
      }
    }
    return ABSENT;
  }

  /** locate() retried until it is not torn. */
  private consistent(ring: string): Decoded | typeof ABSENT {
    for (let attempt = 0; attempt < this.readRetriesMax; attempt++) {
      const d = this.locate(ring);
      if (d !== null) return d;
      this.retries++;
    }
    throw this.tornRead(ring);
  }

  /** current(r) retried until it is not torn. */
  private stable(r: number): Decoded {
    for (let attempt = 0; attempt < this.readRetriesMax; attempt++) {
      const d = this.current(r);
      if (d !== null) return d;
      this.retries++;
    }
    throw this.tornRead(`#${r}`);
  }

  /** Record `r` decoded at its current seq value (from cache when seq has not moved). */
  private current(r: number): Decoded | null {
    const seqIndex = ringSeqByte(this.layout, r) / 4;
    const seq = Atomics.load(this.i32, seqIndex);
    const cached = this.cache[r];
    if (cached !== undefined && cached.seq === seq) return cached;
    const d = this.decode(r, seqIndex, seq);
    if (d !== null) this.cache[r] = d;
    return d;
  }

  /** Reads record `r` from the copy `seq` selects; null if seq moved before the read finished. */
  private decode(r: number, seqIndex: number, seq: number): Decoded | null {
    const L = this.layout;
    const base = ringCopyByte(L, r, seq & 1);
    const w = base / 4;
    const active = Atomics.load(this.i32, w + C.STATE) === RING_ACTIVE;
    const nodeCount = active ? Atomics.load(this.i32, w + C.NODE_COUNT) : 0;
    const nameLen = active ? Atomics.load(this.i32, w + C.NAME_LEN) : 0;
    const name = active ? loadString(this.u8, base + L.nameOff, nameLen, this.scratch) : "";
    const nodes: string[] = [];
    let sane = name !== null && nodeCount >= 0 && nodeCount <= L.limits.ringNodesMax;
    for (let i = 0; sane && i < nodeCount; i++) {
      const len = Atomics.load(this.u8, base + L.nodeLensOff + i);
      const id = loadString(this.u8, base + L.nodeIdsOff + i * L.limits.nodeIdBytesMax, len, this.scratch);
      if (id === null || len === 0) sane = false;
      else nodes.push(id);
    }
    const epoch = (Atomics.load(this.i32, w + C.EPOCH_HI) >>> 0) * 2 ** 32 + (Atomics.load(this.i32, w + C.EPOCH_LO) >>> 0);
    const replicas = Atomics.load(this.i32, w + C.REPLICAS);
    const checksum = Atomics.load(this.i32, w + C.CHECKSUM) >>> 0;
    if (Atomics.load(this.i32, seqIndex) !== seq) return null;
    // Unchanged seq means nothing was written during the read, so garbage here is corruption, not a race.
    if (!sane) throw new BrineError("RING_LAYOUT_MISMATCH", `ring record ${r} is corrupt`);
    return {
      seqIndex,
      seq,
      active,
      name: name ?? "",
      epoch,
      nodes,
      nodeIndex: new Map(nodes.map((id, i) => [id, i])),
      hashes: nodes.map(nodeHash),
      replicas,
      checksum,
      slotsByte: base + L.slotsOff,
    };
  }

  /** The routes table at the current routes seq, decoded once per seq value. */
  private routesNow(): DecodedRoutes {
    const L = this.layout;
    for (let attempt = 0; attempt < this.readRetriesMax; attempt++) {
      const seq = Atomics.load(this.i32, H.ROUTES_SEQ);
      if (this.routesCache?.seq === seq) return this.routesCache;
      const base = routesCopyByte(L, seq & 1);
      const used = Atomics.load(this.i32, base / 4);
      const rows: { dataType: string; ring: string; state: number }[] = [];
      let sane = used >= 0 && used <= L.limits.dataTypesMax;
      for (let i = 0; sane && i < used; i++) {
        const rb = routeRowByte(L, base, i);
        const dataType = loadString(this.u8, rb + L.rowDataTypeOff, Atomics.load(this.i32, rb / 4 + R.DT_LEN), this.scratch);
        const ring = loadString(this.u8, rb + L.rowRingOff, Atomics.load(this.i32, rb / 4 + R.RING_LEN), this.scratch);
        if (dataType === null || ring === null) sane = false;
        else rows.push({ dataType, ring, state: Atomics.load(this.i32, rb / 4 + R.STATE) });
      }
      if (Atomics.load(this.i32, H.ROUTES_SEQ) !== seq) {
        this.retries++;
        continue;
      }
      if (!sane) throw new BrineError("RING_LAYOUT_MISMATCH", "routes table is corrupt");
      const byType = new Map(rows.map((row, i) => [row.dataType, { state: row.state, ring: row.ring, row: i }]));
      this.routesCache = { seq, byType, rows };
      return this.routesCache;
    }
    throw this.tornRead("routes");
  }
}

