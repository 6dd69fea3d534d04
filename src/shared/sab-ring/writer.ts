/**
 * RingWriter: the only code that writes the shared ring buffer. It lives in the Raft worker, which calls it
 * after applying committed entries (see cluster/ring-sync.ts). Readers in other threads never block on it:
 * every write follows the two-copy latch described in layout.ts.
 *
 * Single writer is enforced, not assumed: attaching claims the header's writer word with compareExchange,
 * and a second attach fails with RING_WRITER_CLAIMED until release().
 *
 * The writer takes finished assignments (nodes + slot owners), not bare node lists: the table depends on the
 * previous table (assign.ts), and that history must come from replicated, snapshotted state, never from this
 * volatile buffer, or a restarted worker would derive a table its peers do not have.
 */
import { BrineError } from "../errors.js";
import { checkAssignment, tableChecksum, type RingAssignment } from "./assign.js";
import {
  C,
  H,
  R,
  RING_ACTIVE,
  RING_FREE,
  ROUTE_NONE,
  ROUTE_TO_RING,
  encodeBounded,
  loadString,
  readLayout,
  ringCopyByte,
  ringSeqByte,
  routeRowByte,
  routesCopyByte,
  storeBytes,
  type RingLayout,
} from "./layout.js";

/** What one ring should look like after a sync. */
export interface RingTarget {
  readonly assignment: RingAssignment;
  /** monotone per ring; equal epochs must carry equal tables */
  readonly epoch: number;
  /** default replica count for replicas(); >= 1 */
  readonly replicas: number;
}

interface Published {
  record: number;
  epoch: number;
  checksum: number;
  replicas: number;
  /** the table object published (sync skips the checksum when it is handed the same one again); none when loaded */
  assignment?: RingAssignment;
}

interface RouteRow {
  state: number;
  dataType: string;
  /** the ring routed to, or the last one while the route is NONE (kept for drop_stats) */
  ring: string;
}

const WRITER_CLAIMED = 1;

export class RingWriter {
  private readonly i32: Int32Array;
  private readonly u8: Uint8Array;
  private readonly published = new Map<string, Published>();
  private readonly rows: RouteRow[] = [];
  private released = false;

  private constructor(
    private readonly sab: SharedArrayBuffer,
    readonly layout: RingLayout,
  ) {
    this.i32 = new Int32Array(sab);
    this.u8 = new Uint8Array(sab);
  }

  /** Claims the buffer's single writer slot and loads what is already published (a re-attached writer). */
  static attach(sab: SharedArrayBuffer): RingWriter {
    const layout = readLayout(sab);
    const w = new RingWriter(sab, layout);
    if (Atomics.compareExchange(w.i32, H.WRITER, 0, WRITER_CLAIMED) !== 0) {
      throw new BrineError("RING_WRITER_CLAIMED");
    }
    w.loadExisting();
    return w;
  }

  /** Gives up the writer slot; this object refuses further writes. */
  release(): void {
    if (this.released) return;
    this.released = true;
    Atomics.store(this.i32, H.WRITER, 0);
  }

  /** The buffer this writer owns, to hand to readers. */
  get buffer(): SharedArrayBuffer {
    return this.sab;
  }

  /**
   * Publishes `assignment` as ring `name` at `epoch`. Refuses an epoch lower than the published one, and an
   * equal epoch with different content (an epoch names one table); republishing identical content is a no-op.
   */
  publishRing(name: string, assignment: RingAssignment, epoch: number, replicas = 1): void {
    this.checkLive();
    const nameBytes = encodeBounded(name, this.layout.limits.ringNameBytesMax, "RING_BAD_NAME");
    checkAssignment(assignment);
    if (assignment.nodes.length > this.layout.limits.ringNodesMax) {
      throw new BrineError("RING_TOO_MANY_NODES", `${assignment.nodes.length} > ${this.layout.limits.ringNodesMax}`);
    }
    if (!Number.isSafeInteger(epoch) || epoch < 0) throw new BrineError("RING_BAD_QUERY", `epoch ${epoch}`);
    if (!Number.isSafeInteger(replicas) || replicas < 1) throw new BrineError("RING_BAD_QUERY", `replicas ${replicas}`);
    const nodeBytes = assignment.nodes.map((id) => encodeBounded(id, this.layout.limits.nodeIdBytesMax, "RING_BAD_NODE_ID"));
    const checksum = tableChecksum(assignment);

    const current = this.published.get(name);
    if (current !== undefined) {
      if (epoch < current.epoch) throw new BrineError("RING_EPOCH_REGRESSED", `${name}: ${epoch} < ${current.epoch}`);
      if (epoch === current.epoch) {
        if (checksum === current.checksum && replicas === current.replicas) return;
        throw new BrineError("RING_EPOCH_REGRESSED", `${name}: epoch ${epoch} reused for a different table`);
      }
    }
    const record = current?.record ?? this.freeRecord();
    this.latchWrite(ringSeqByte(this.layout, record) / 4, (copy) =>
      this.writeRingCopy(ringCopyByte(this.layout, record, copy), {
        state: RING_ACTIVE,
        nameBytes,
        epoch,
        nodeBytes,
        replicas,
        checksum,
        owners: assignment.owners,
      }),
    );
    this.published.set(name, { record, epoch, checksum, replicas, assignment });
  }

  /** Removes ring `name` (readers then see it as absent). Returns false when it was not published. */
  dropRing(name: string): boolean {
    this.checkLive();
    const current = this.published.get(name);
    if (current === undefined) return false;
    this.latchWrite(ringSeqByte(this.layout, current.record) / 4, (copy) =>
      this.writeRingCopy(ringCopyByte(this.layout, current.record, copy), null),
    );
    this.published.delete(name);
    return true;
  }

  /**
   * Makes the buffer hold exactly the rings in `targets`: publishes the ones whose epoch, table or replicas
   * changed and drops the ones no longer wanted. Level-triggered, so calling it after every apply is cheap
   * and self-correcting. Returns what it changed.
   */
  sync(targets: ReadonlyMap<string, RingTarget>): { published: string[]; dropped: string[] } {
    this.checkLive();
    const dropped: string[] = [];
    for (const name of [...this.published.keys()]) {
      if (!targets.has(name) && this.dropRing(name)) dropped.push(name);
    }
    const published: string[] = [];
    for (const [name, t] of targets) {
      const cur = this.published.get(name);
      // the same table object again is the common case (the Raft worker syncs after every applied batch):
      // checksumming 4,096 slots each time was ~30-90 µs per commit on every master
      if (cur?.epoch === t.epoch && cur.replicas === t.replicas && (cur.assignment === t.assignment || cur.checksum === tableChecksum(t.assignment))) continue;
      this.publishRing(name, t.assignment, t.epoch, t.replicas);
      published.push(name);
    }
    return { published, dropped };
  }

  /**
   * Replaces the routing table: data type -> ring name, or null for "route to None" (broadcast). Data types
   * that were routed before and are missing now become NONE. Each data type keeps its row (and so its drop
   * counters) for the life of the buffer; more than dataTypesMax distinct types is refused.
   */
  publishRoutes(routes: ReadonlyMap<string, string | null> | Readonly<Record<string, string | null>>): void {
    this.checkLive();
    const entries: [string, string | null][] = routes instanceof Map ? [...routes] : Object.entries(routes);
    const { dataTypeBytesMax, ringNameBytesMax, dataTypesMax } = this.layout.limits;
    // every known type starts as NONE; the ones present in `routes` are set below
    const next = this.rows.map((r) => ({ ...r, state: ROUTE_NONE }));
    for (const [dataType, ring] of entries) {
      encodeBounded(dataType, dataTypeBytesMax, "RING_BAD_DATA_TYPE");
      if (ring !== null) encodeBounded(ring, ringNameBytesMax, "RING_BAD_NAME");
      let row = next.find((r) => r.dataType === dataType);
      if (row === undefined) {
        if (next.length >= dataTypesMax) throw new BrineError("RING_TOO_MANY_DATA_TYPES", `${dataTypesMax}`);
        row = { state: ROUTE_NONE, dataType, ring: "" };
        next.push(row);
      }
      row.state = ring === null ? ROUTE_NONE : ROUTE_TO_RING;
      if (ring !== null) row.ring = ring;
    }
    const same =
      next.length === this.rows.length &&
      next.every((r, i) => r.state === this.rows[i]!.state && r.ring === this.rows[i]!.ring && r.dataType === this.rows[i]!.dataType);
    if (same) return;
    this.latchWrite(H.ROUTES_SEQ, (copy) => this.writeRoutesCopy(routesCopyByte(this.layout, copy), next));
    this.rows.length = 0;
    this.rows.push(...next);
  }

  // --- internals -------------------------------------------------------------------------------------------

  private checkLive(): void {
    if (this.released) throw new BrineError("RING_WRITER_CLAIMED", "this writer was released");
  }

  /**
   * The latch (layout.ts): bump seq to odd, write copy 0 (readers are on copy 1), bump seq to even, write
   * copy 1 (readers are on copy 0). Both copies end up equal, ready for the next write.
   */
  private latchWrite(seqIndex: number, writeCopy: (copy: 0 | 1) => void): void {
    const s = Atomics.add(this.i32, seqIndex, 1) + 1;
    if ((s & 1) !== 1) throw new BrineError("RING_WRITER_CLAIMED", "seq parity broken: a second writer?");
    writeCopy(0);
    Atomics.add(this.i32, seqIndex, 1);
    writeCopy(1);
  }

  private freeRecord(): number {
    const used = new Set([...this.published.values()].map((p) => p.record));
    for (let r = 0; r < this.layout.limits.ringsMax; r++) if (!used.has(r)) return r;
    throw new BrineError("RING_TOO_MANY_RINGS", `${this.layout.limits.ringsMax}`);
  }

  private writeRingCopy(
    base: number,
    v: {
      state: number;
      nameBytes: Uint8Array;
      epoch: number;
      nodeBytes: Uint8Array[];
      replicas: number;
      checksum: number;
      owners: Uint8Array;
    } | null,
  ): void {
    const w = base / 4;
    const L = this.layout;
    if (v === null) {
      Atomics.store(this.i32, w + C.STATE, RING_FREE);
      Atomics.store(this.i32, w + C.NODE_COUNT, 0);
      Atomics.store(this.i32, w + C.NAME_LEN, 0);
      return;
    }
    Atomics.store(this.i32, w + C.STATE, v.state);
    Atomics.store(this.i32, w + C.EPOCH_LO, v.epoch % 2 ** 32 | 0);
    Atomics.store(this.i32, w + C.EPOCH_HI, Math.floor(v.epoch / 2 ** 32) | 0);
    Atomics.store(this.i32, w + C.NODE_COUNT, v.nodeBytes.length);
    Atomics.store(this.i32, w + C.REPLICAS, v.replicas);
    Atomics.store(this.i32, w + C.NAME_LEN, v.nameBytes.length);
    Atomics.store(this.i32, w + C.CHECKSUM, v.checksum | 0);
    storeBytes(this.u8, base + L.nameOff, v.nameBytes);
    for (let i = 0; i < v.nodeBytes.length; i++) {
      Atomics.store(this.u8, base + L.nodeLensOff + i, v.nodeBytes[i]!.length);
      storeBytes(this.u8, base + L.nodeIdsOff + i * L.limits.nodeIdBytesMax, v.nodeBytes[i]!);
    }
    storeBytes(this.u8, base + L.slotsOff, v.owners);
  }

  private writeRoutesCopy(base: number, rows: readonly RouteRow[]): void {
    const L = this.layout;
    const enc = new TextEncoder();
    Atomics.store(this.i32, base / 4, rows.length);
    rows.forEach((row, i) => {
      const rb = routeRowByte(L, base, i);
      const dt = enc.encode(row.dataType);
      const ring = enc.encode(row.ring);
      Atomics.store(this.i32, rb / 4 + R.STATE, row.state);
      Atomics.store(this.i32, rb / 4 + R.DT_LEN, dt.length);
      Atomics.store(this.i32, rb / 4 + R.RING_LEN, ring.length);
      storeBytes(this.u8, rb + L.rowDataTypeOff, dt);
      storeBytes(this.u8, rb + L.rowRingOff, ring);
    });
  }

  /** Rebuilds the in-memory index from the buffer. Only the writer writes, so the current copy is stable. */
  private loadExisting(): void {
    const L = this.layout;
    const scratch = new Uint8Array(Math.max(L.limits.ringNameBytesMax, L.limits.dataTypeBytesMax));
    for (let r = 0; r < L.limits.ringsMax; r++) {
      const copy = Atomics.load(this.i32, ringSeqByte(L, r) / 4) & 1;
      const base = ringCopyByte(L, r, copy);
      const w = base / 4;
      if (Atomics.load(this.i32, w + C.STATE) !== RING_ACTIVE) continue;
      const name = loadString(this.u8, base + L.nameOff, Atomics.load(this.i32, w + C.NAME_LEN), scratch);
      if (name === null) throw new BrineError("RING_LAYOUT_MISMATCH", `ring record ${r} has a bad name`);
      this.published.set(name, {
        record: r,
        epoch: (Atomics.load(this.i32, w + C.EPOCH_HI) >>> 0) * 2 ** 32 + (Atomics.load(this.i32, w + C.EPOCH_LO) >>> 0),
        checksum: Atomics.load(this.i32, w + C.CHECKSUM) >>> 0,
        replicas: Atomics.load(this.i32, w + C.REPLICAS),
      });
    }
    const base = routesCopyByte(L, Atomics.load(this.i32, H.ROUTES_SEQ) & 1);
    const used = Atomics.load(this.i32, base / 4);
    for (let i = 0; i < used; i++) {
      const rb = routeRowByte(L, base, i);
      const dataType = loadString(this.u8, rb + L.rowDataTypeOff, Atomics.load(this.i32, rb / 4 + R.DT_LEN), scratch);
      const ring = loadString(this.u8, rb + L.rowRingOff, Atomics.load(this.i32, rb / 4 + R.RING_LEN), scratch);
      if (dataType === null || ring === null) throw new BrineError("RING_LAYOUT_MISMATCH", `route row ${i}`);
      this.rows.push({ state: Atomics.load(this.i32, rb / 4 + R.STATE), dataType, ring });
    }
  }
}
