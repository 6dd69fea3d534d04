/**
 * Placement of the minion data cache (grains and pillar: data type `grains`) and the mine (data type `mine`) on
 * the owners of each minion id, in the Raft worker beside the jobs' (job-placement.ts, whose outbox, tables and
 * round structure this reuses; decisions in src/shared/minion-placement.ts and src/shared/placement.ts). Peer
 * channel `raft/minions` (its name, limits and answer checks: minion-wire.ts), requests only:
 *
 * - **Hand-off** (`store`): while `mine` (resp. `grains`) is routed to a ring, every write of a minion's mine
 *   (resp. data) record on this master (request workers, runner threads: MinionCache with placement on) puts
 *   `~m/<id>` (resp. `~d/<id>`) in the jobs' outbox `jobs/handoff`, in the same commit as the record. Every
 *   handoffIntervalMs a round takes up to minionRoundKeysMax of those keys, sends each owner of the id the
 *   record with its stamp, and settles what every owner acknowledged (the outbox key goes if its stamp did not
 *   change; on a master that is not an owner the record goes too, if no newer write replaced it). An owner keeps
 *   the newest record by stamp (last writer wins: two masters handing off the same minion converge) and answers
 *   once it is on disk; it refuses an id its own table says it does not own.
 * - **Placement scans**: the first time a bank is placed on a ring (or on another ring), and whenever the
 *   ring's table changes (voters, replicas, members), this master walks the bank, rebalanceRoundKeysMax ids a
 *   round, and puts back in the outbox every record it no longer owns or that has a new owner (mustHandOn, as
 *   the jobs' rebalancing; every record the first time): a cluster that held every minion everywhere
 *   (broadcast) ends with each on its owners only. The table
 *   the copies are placed by is kept in `jobs/placed-by` under `~data/<ring>` / `~mine/<ring>` once a scan is
 *   done, so a master stopped mid-scan scans again when it starts; a gather back to broadcast drops it, so a
 *   route set again (to the same ring too) scans what the gather brought, once no pull of the bank is under way.
 * - **Back to broadcast** (gather, spread, collect, shed): minion-broadcast.ts, which this hands the outbox keys
 *   of banks no longer routed and the `spread` requests it is served.
 * - **Reads** (`records`, `target`, `ids`): the asking thread (a request worker through the main thread, a
 *   runner thread) asks its Raft worker, which asks every other master once (ids in chunks of
 *   readIdsPerRequestMax) and merges: the newest record of each id, the ids a target matches among those each
 *   master holds, the ids each holds. A down master is skipped and named; with replicas >= 2 the other owner
 *   answers.
 */
import { BrineError } from "../../shared/errors.js";
import { cbor } from "../../shared/cbor.js";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { compareIds, validId } from "../../shared/protocol/ids.js";
import { mustHandOn, ownersOf, planRound, sameOwnership, settleRound, tableUsable, type PlacementTable } from "../../shared/placement.js";
import {
  addressesOnly,
  dataTypeOf,
  MINION_OUTBOX_PREFIX,
  minionOutboxKey,
  newestRecords,
  parseMinionOutboxKey,
  placedByKey,
  placedMarkKey,
  PlacementQuiet,
  type HeldIds,
  type MinionAnswer,
  type MinionBank,
  type MinionQuery,
  type MinionRecord,
  type TargetQuery,
} from "../../shared/minion-placement.js";
import { checkMinions } from "../../lib/targeting/check-minions.js";
import { takeLinearRefusals, withLinearPatterns } from "../../lib/targeting/pcre.js";
import type { NodegroupConfig } from "../../lib/targeting/nodegroups.js";
import { MinionCache } from "../../lib/store/minion-cache.js";
import { handoffStamp } from "../../lib/store/job-cache.js";
import type { Store } from "../../lib/store/lmdb-env.js";
import type { PeerMessage } from "./peer/peer-types.js";
import { byteBatches, handoffIntervalMs, rebalanceRoundKeysMax, storedTable, tableRecord } from "./job-placement.js";
import { BANKS, MinionBroadcast } from "./minion-broadcast.js";
import { unknownKind } from "./peer-kinds.js";
import {
  askPeer,
  checkRecord,
  checkRecordsAnswer,
  checkTargetAnswer,
  idsAnswerMax,
  isMap,
  MINION_PLACEMENT_CHANNEL,
  minionRequestBytesMax,
  readIdsPerRequestMax,
  recordsAnswerBytesMax,
  stampsPageMax,
  type MinionPlacementDeps,
} from "./minion-wire.js";

export { MINION_PLACEMENT_CHANNEL, type MinionPlacementDeps };

const isStringMap = (v: unknown): v is Record<string, string> => isMap(v) && Object.values(v).every((x) => typeof x === "string");

/** outbox keys (minion records) one round takes at most, count */
export const minionRoundKeysMax = 2_000;

const log = getLogger("brine.cluster.placement");
const roundLog = new LogBudget(1, 10_000, (line) => log.warning(line), "minion data hand-off");

/** A placement scan of one bank in progress. */
interface Scan {
  /** what the copies were placed by when it started (undefined: never placed on this ring, every record goes) */
  prev: PlacementTable | undefined;
  next: PlacementTable;
  after: string | undefined;
}

export class MinionPlacement {
  private readonly now: () => number;
  private readonly cache: () => MinionCache;
  private busy = false;
  private last = 0;
  private readonly off: () => void;
  private absent = new Map<string, number>();
  /** per bank: the table of its ring at the last round, and a scan in progress */
  private readonly seen = new Map<MinionBank, PlacementTable>();
  private readonly scans = new Map<MinionBank, Scan>();
  /** when the tick may skip the store (PlacementQuiet) */
  private readonly quiet = new PlacementQuiet();
  /** the way back to broadcast (gather, spread, collect, shed) */
  readonly broadcast: MinionBroadcast;

  constructor(private readonly d: MinionPlacementDeps) {
    this.now = d.now ?? Date.now;
    let c: MinionCache | undefined;
    this.cache = () => (c ??= new MinionCache(d.store(), this.now));
    this.broadcast = new MinionBroadcast(d, this.cache);
    this.off = d.channel.on(MINION_PLACEMENT_CHANNEL, (m) => this.serve(m));
  }

  close(): void {
    this.off();
  }

  /**
   * Called on every tick of the worker's timer: starts a round when one is due and none runs. With neither bank
   * routed, once a look found nothing to do idleSettleMs after the routes' last change, it reads only the routes
   * (the shared ring buffer) until one changes.
   */
  tick(): void {
    const now = this.now();
    const grains = this.d.route("grains");
    const mine = this.d.route("mine");
    // neither bank routed and nothing left to hand off, spread or gather: no look at the store until a route changes
    if (this.quiet.quiet(grains, mine, now)) return;
    const gathering = this.broadcast.tick();
    if (this.busy || now - this.last < handoffIntervalMs) return;
    if (grains === null && mine === null) {
      const pending = this.pendingKeys();
      this.quiet.looked(!pending && !gathering, now);
      if (!pending) return;
    }
    this.last = now;
    this.busy = true;
    this.round()
      .catch((e: unknown) => roundLog.line(`a minion data hand-off round failed: ${(e as Error)?.message ?? String(e)}`))
      .finally(() => (this.busy = false));
  }

  private pendingKeys(): boolean {
    for (const _ of this.d.store().handoff.getKeys({ start: MINION_OUTBOX_PREFIX, limit: 1 })) return true;
    return false;
  }

  /** One hand-off round (see the header). */
  async round(): Promise<void> {
    const s = this.d.store();
    for (const bank of BANKS) await this.scan(bank, s);
    const entries: [string, number][] = [];
    for (const { key, value } of s.handoff.getRange({ start: MINION_OUTBOX_PREFIX, limit: minionRoundKeysMax })) entries.push([key, value]);
    if (entries.length === 0) return;
    const tables = new Map<MinionBank, PlacementTable | undefined>();
    const unrouted: [string, number][] = [];
    for (const bank of BANKS) {
      const ring = this.d.route(dataTypeOf(bank));
      tables.set(bank, ring === null ? undefined : await this.d.table(ring));
    }
    const placed = entries.filter((e) => {
      const k = parseMinionOutboxKey(e[0]);
      if (k && this.d.route(dataTypeOf(k.bank)) !== null) return true;
      unrouted.push(e);
      return false;
    });
    const plan = planRound(placed, (key) => {
      const k = parseMinionOutboxKey(key)!;
      const t = tables.get(k.bank);
      return t ? ownersOf(t, k.id) : [];
    }, this.d.self, (key) => key);
    if (plan.unplaced.length > 0) roundLog.line(`${plan.unplaced.length} minion records wait to be handed off: no table of their ring on ${this.d.self} and none of its hosts answered`);
    const c = this.cache();
    const orphans: [string, number][] = [];
    const absentNow = new Map<string, number>();
    const records = new Map<string, MinionRecord>();
    for (const [key, j] of plan.jobs) {
      const [, stamp] = j.keys[0]!;
      const k = parseMinionOutboxKey(key)!;
      const r = c.record(k.bank, k.id);
      if (r) {
        records.set(key, r);
        continue;
      }
      // the record's write may not have committed yet (the outbox key did): only the same stamp twice is an orphan
      j.keys = [];
      if (this.absent.get(key) === stamp) orphans.push([key, stamp]);
      else absentNow.set(key, stamp);
    }
    this.absent = absentNow;
    const acked = new Map<string, Set<string>>();
    await Promise.all(
      [...plan.byPeer].map(async ([peer, keys]) => {
        const ok = new Set<string>();
        acked.set(peer, ok);
        if (!this.d.up(peer)) {
          roundLog.line(`minion records for ${peer} wait on ${this.d.self}: ${peer} is down`);
          return;
        }
        const items = keys.filter((k) => records.has(k)).map((k) => records.get(k)!);
        for (const batch of byteBatches(items, minionRequestBytesMax)) {
          try {
            const a = cbor.decode(await this.d.channel.request(peer, MINION_PLACEMENT_CHANNEL, cbor.encode({ op: "store", items: batch }) as Uint8Array, this.d.timeoutMs)) as { ok?: unknown; refused?: unknown };
            if (Array.isArray(a?.ok)) for (const key of a.ok) if (typeof key === "string") ok.add(key);
            if (Array.isArray(a?.refused) && a.refused.length > 0) roundLog.line(`${peer} refused ${a.refused.length} minion records as not its own (tables differ; sent again next round)`);
          } catch (e) {
            roundLog.line(`handing ${batch.length} minion records to ${peer} failed, retried next round: ${(e as Error).message}`);
            break;
          }
        }
      }),
    );
    const st = settleRound(plan, acked, this.d.self);
    const spread = await this.broadcast.spread(unrouted);
    if (st.settled.length === 0 && orphans.length === 0 && spread.length === 0) return;
    await s.root.transaction(() => {
      for (const [key, stamp] of [...orphans, ...spread]) if (s.handoff.get(key) === stamp) s.handoff.removeSync(key);
      for (const [key, stamp] of st.settled) {
        // a write since the round read it rewrote the stamp: that record goes again next round
        if (s.handoff.get(key) !== stamp) continue;
        s.handoff.removeSync(key);
        const r = records.get(key);
        if (r && st.drop.has(key)) c.dropSync(r.k, r.id, r);
      }
    });
  }

  /**
   * A placement scan of `bank` (see the header): started when the bank's ring's table is not the one its copies
   * were placed by, one slice of the bank per round, each record whose owners differ put in the outbox.
   */
  private async scan(bank: MinionBank, s: Store): Promise<void> {
    const ring = this.d.route(dataTypeOf(bank));
    if (ring === null) {
      this.seen.delete(bank);
      this.scans.delete(bank);
      return;
    }
    // records a pull of the bank (back to broadcast, a route cleared a moment ago) is still storing: scanned after it
    if (this.broadcast.pulling(bank)) return;
    const key = placedByKey(bank, ring);
    // placed now: the way back to broadcast must gather, even if the route is cleared before a scan finished
    const mark = placedMarkKey(bank);
    if (!s.placedBy.doesExist(mark)) await s.placedBy.put(mark, { placed: true });
    const own = this.d.localTable(ring);
    const t = own && tableUsable(own) ? own : await this.d.table(ring);
    if (!t || !tableUsable(t)) return;
    const seen = this.seen.get(bank);
    this.seen.set(bank, t);
    let sc = this.scans.get(bank);
    // the copies are no longer placed by a table when a gather (back to broadcast) dropped it: a route cleared and set
    // again, to the same ring too, between two rounds of this master scans what the gather brought
    if (!sc && (!seen || seen.ring !== ring || !sameOwnership(seen, t) || !s.placedBy.doesExist(key))) {
      const placedBy = storedTable(s.placedBy.get(key), ring);
      if (!placedBy || !sameOwnership(placedBy, t)) {
        this.scans.set(bank, (sc = { prev: placedBy, next: t, after: undefined }));
        log.info(`${dataTypeOf(bank)} on ring ${ring}: ${placedBy ? "the ring's owners changed" : "placed on the ring for the first time"}; this master's records whose owners differ go to the hand-off`);
      }
    } else if (sc && !sameOwnership(sc.next, t)) {
      // the table changed again during the scan: from the start, against what the copies were placed by
      sc.next = t;
      sc.after = undefined;
    }
    if (!sc) return;
    const db = bank === "data" ? s.minionData : s.mine;
    const ids: string[] = [];
    for (const id of db.getKeys({ ...(sc.after !== undefined ? { start: sc.after } : {}), limit: rebalanceRoundKeysMax + 1 })) {
      if (id === sc.after) continue;
      ids.push(id as string);
      if (ids.length >= rebalanceRoundKeysMax) break;
    }
    const next = sc.next;
    const prev = sc.prev;
    // as the jobs' rebalancing (mustHandOn): what this master no longer owns, or what has a new owner; a bank
    // placed for the first time hands on every record (every master may hold any minion, and an owner may lack it)
    const moved = ids.filter((id) => (prev ? mustHandOn(prev, next, id, this.d.self) : ownersOf(next, id).length > 0));
    if (moved.length > 0) {
      await s.root.transaction(() => {
        for (const id of moved) {
          const k = minionOutboxKey(bank, id);
          if (!s.handoff.doesExist(k)) s.handoff.putSync(k, handoffStamp());
        }
      });
    }
    if (ids.length < rebalanceRoundKeysMax) {
      this.scans.delete(bank);
      await s.placedBy.put(key, tableRecord(next));
      log.info(`${dataTypeOf(bank)} on ring ${ring}: the placement scan of this master's records is done`);
    } else sc.after = ids[ids.length - 1];
  }
  // --- reads (asked by this master's threads) -----------------------------------------------------------

  /** Answers a thread's question with every master's data (see the header). */
  async query(q: MinionQuery): Promise<MinionAnswer> {
    switch (q.op) {
      case "records":
        return this.clusterRecords(q.bank, q.ids, q.addrs === true);
      case "target":
        return this.clusterTarget(q);
      case "ids":
        return this.clusterIds(q.bank);
      case "held":
        return this.heldEverywhere(q.bank);
      case "collect":
        return this.broadcast.collect(q.bank, Number.isSafeInteger(q.id) ? q.id : undefined, typeof q.waitMs === "number" && q.waitMs >= 0 ? q.waitMs : Infinity);
      case "shed":
        return this.broadcast.shed(q.ring, q.bank, q.dryRun);
      default:
        throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", `unknown query ${String((q as { op?: unknown }).op)}`);
    }
  }

  /** Asks every other master that is up; `ask` gets one and returns its answer; the down and failing are named. */
  private async everyPeer<T>(ask: (peer: string) => Promise<T>): Promise<{ answers: T[]; unreachable: Record<string, string> }> {
    const unreachable: Record<string, string> = {};
    const answers: T[] = [];
    await Promise.all(
      this.d.peers().map(async (p) => {
        if (!this.d.up(p)) {
          unreachable[p] = "down (no peer session)";
          return;
        }
        try {
          answers.push(await ask(p));
        } catch (e) {
          unreachable[p] = (e as Error).message;
        }
      }),
    );
    return { answers, unreachable };
  }

  private ask(peer: string, q: Record<string, unknown>): Promise<unknown> {
    return askPeer(this.d, peer, q);
  }

  private async clusterRecords(bank: MinionBank, ids: string[], addrs: boolean): Promise<MinionAnswer> {
    const wanted = ids.filter(validId);
    const local = this.localRecords(bank, wanted, Infinity, addrs).records;
    const { answers, unreachable } = await this.everyPeer(async (p) => {
      const got: MinionRecord[] = [];
      for (let i = 0; i < wanted.length; i += readIdsPerRequestMax) {
        let ask = wanted.slice(i, i + readIdsPerRequestMax);
        while (ask.length > 0) {
          const a = checkRecordsAnswer(await this.ask(p, { op: "records", bank, ids: ask, ...(addrs ? { addrs } : {}) }), bank);
          got.push(...a.records);
          if (a.rest.length >= ask.length) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", `${p}'s records answer did not advance`);
          ask = a.rest;
        }
      }
      return got;
    });
    return { records: [...newestRecords([local, ...answers]).values()], unreachable };
  }

  private async clusterTarget(q: TargetQuery): Promise<MinionAnswer> {
    const ids = q.ids.filter(validId);
    const matched = new Set<string>();
    const held = new Set<string>();
    const { unreachable } = await this.everyPeer(async (p) => {
      for (let i = 0; i < ids.length; i += readIdsPerRequestMax) {
        const a = checkTargetAnswer(await this.ask(p, { op: "target", tgt: q.tgt, tgtType: q.tgtType, delimiter: q.delimiter, greedy: q.greedy, nodegroups: q.nodegroups, ids: ids.slice(i, i + readIdsPerRequestMax) }));
        for (const id of a.matched) matched.add(id);
        for (const id of a.held) held.add(id);
      }
    });
    return { matched: [...matched], held: [...held], unreachable };
  }

  private async clusterIds(bank: MinionBank): Promise<MinionAnswer> {
    const all = new Set(this.localIds(bank).ids);
    const { answers, unreachable } = await this.everyPeer((p) => this.askIds(p, bank));
    for (const l of answers) for (const id of l.ids) all.add(id);
    return { ids: [...all].sort(compareIds), unreachable };
  }

  /** What every master holds of `bank`, by node id (cluster.placement_check). */
  private async heldEverywhere(bank: MinionBank): Promise<MinionAnswer> {
    const held: Record<string, HeldIds | { error: string }> = { [this.d.self]: this.localIds(bank) };
    const { unreachable } = await this.everyPeer(async (p) => {
      held[p] = await this.askIds(p, bank);
    });
    for (const [p, why] of Object.entries(unreachable)) held[p] = { error: why };
    return { held_by: held, unreachable };
  }

  private async askIds(peer: string, bank: MinionBank): Promise<HeldIds> {
    const a = (await this.ask(peer, { op: "ids", bank })) as Record<string, unknown>;
    if (!isMap(a) || !Array.isArray(a.ids)) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "malformed ids answer");
    return { ids: a.ids.filter(validId), truncated: a.truncated === true, pending: Number.isSafeInteger(a.pending) ? (a.pending as number) : 0, ...(a.gathering === true ? { gathering: true } : {}), ...(isStringMap(a.gathered_without) ? { gathered_without: a.gathered_without } : {}) };
  }

  // --- this master's copies --------------------------------------------------------------------------------

  /** This master's records of `ids` (tombstones included), until `maxBytes`; the ids left out are `rest`. */
  private localRecords(bank: MinionBank, ids: readonly string[], maxBytes: number, addrs = false): { records: MinionRecord[]; rest: string[] } {
    const c = this.cache();
    const records: MinionRecord[] = [];
    let bytes = 0;
    for (let i = 0; i < ids.length; i++) {
      const r = c.record(bank, ids[i]!);
      if (!r) continue;
      if (addrs) r.v = addressesOnly(r.v);
      if (maxBytes !== Infinity) {
        bytes += (cbor.encode(r) as Uint8Array).byteLength;
        if (bytes > maxBytes && records.length > 0) return { records, rest: ids.slice(i) };
      }
      records.push(r);
    }
    return { records, rest: [] };
  }

  /** This master's ids in `bank` (the first idsAnswerMax), and its records of the bank waiting in the outbox. */
  private localIds(bank: MinionBank): HeldIds {
    const s = this.d.store();
    const db = bank === "data" ? s.minionData : s.mine;
    const ids: string[] = [];
    for (const id of db.getKeys({ limit: idsAnswerMax + 1 })) ids.push(id as string);
    const truncated = ids.length > idsAnswerMax;
    if (truncated) ids.pop();
    const prefix = minionOutboxKey(bank, "");
    const without = this.broadcast.gatheredWithout(bank);
    return { ids, truncated, pending: s.handoff.getCount({ start: prefix, end: `${prefix}\uffff` }), ...(this.broadcast.gatheringNow(bank) ? { gathering: true } : {}), ...(without ? { gathered_without: without } : {}) };
  }

  // --- serving peers -------------------------------------------------------------------------------------

  private async serve(m: PeerMessage): Promise<Uint8Array> {
    if (!m.request) throw new BrineError("CLUSTER_PEER_CHANNEL", `${MINION_PLACEMENT_CHANNEL} takes requests only`);
    let q: Record<string, unknown>;
    try {
      q = cbor.decode(m.payload) as Record<string, unknown>;
    } catch {
      throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "not CBOR");
    }
    if (typeof q !== "object" || q === null) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "not a map");
    const bank = q.bank === "data" || q.bank === "mine" ? q.bank : undefined;
    const ids = () => {
      if (!Array.isArray(q.ids) || q.ids.length > readIdsPerRequestMax || !q.ids.every(validId)) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", `ids must be at most ${readIdsPerRequestMax} minion ids`);
      return q.ids as string[];
    };
    switch (q.op) {
      case "store":
        return cbor.encode(await this.serveStore(m.from, q)) as Uint8Array;
      case "records":
        if (!bank) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "records names no bank");
        return cbor.encode(this.localRecords(bank, ids(), recordsAnswerBytesMax, q.addrs === true)) as Uint8Array;
      case "target":
        return cbor.encode(this.serveTarget(q, ids())) as Uint8Array;
      case "ids":
        if (!bank) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "ids names no bank");
        return cbor.encode(this.localIds(bank)) as Uint8Array;
      case "stamps": {
        if (!bank) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "stamps names no bank");
        if (q.ids !== undefined) return cbor.encode({ entries: this.cache().stampsOf(bank, ids(), this.d.self) }) as Uint8Array;
        if (q.after !== undefined && !validId(q.after)) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "stamps' cursor is not a minion id");
        const page = this.cache().stampsPage(bank, q.after as string | undefined, stampsPageMax, this.d.self);
        return cbor.encode({ entries: page.entries, ...(page.next !== undefined ? { next: page.next } : {}) }) as Uint8Array;
      }
      case "spread":
        return cbor.encode(await this.broadcast.serveSpread(m.from, q)) as Uint8Array;
      default:
        throw unknownKind(MINION_PLACEMENT_CHANNEL, q.op, this.d.self);
    }
  }

  /** The asked ids this master holds data for, and which of them the target matches (evaluated here). */
  private serveTarget(q: Record<string, unknown>, ids: string[]): { matched: string[]; held: string[] } {
    const tgt = q.tgt;
    if (!(typeof tgt === "string" || (Array.isArray(tgt) && tgt.every((x) => typeof x === "string"))) || typeof q.tgtType !== "string" || typeof q.delimiter !== "string") {
      throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "target needs tgt, tgtType and delimiter");
    }
    const c = this.cache();
    const held = ids.filter((id) => c.get(id) !== undefined);
    if (held.length === 0) return { matched: [], held };
    const nodegroups = typeof q.nodegroups === "object" && q.nodegroups !== null && !Array.isArray(q.nodegroups) ? (q.nodegroups as NodegroupConfig) : {};
    const run = () => checkMinions(tgt as string | string[], q.tgtType as string, { acceptedIds: held, minionData: (id) => c.get(id), nodegroups, greedy: q.greedy !== false }, { delimiter: q.delimiter as string }).minions;
    // a minion's pattern (`_mine_get`): linear time or no match here too, never a stall of this thread
    const matched = q.linear === true ? withLinearPatterns(run) : run();
    if (q.linear === true) takeLinearRefusals();
    return { matched, held };
  }

  /** Stores the records a peer hands off that this master owns (the newest by stamp); answers once on disk. */
  private async serveStore(from: string, q: Record<string, unknown>): Promise<{ ok: string[]; refused: string[] }> {
    if (!Array.isArray(q.items)) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "store carries no items");
    const c = this.cache();
    const ok: string[] = [];
    const refused: string[] = [];
    const writes: Promise<boolean>[] = [];
    const tables = new Map<MinionBank, PlacementTable | undefined>();
    for (const raw of q.items) {
      const r = checkRecord(raw);
      if (!r) {
        roundLog.line(`${from} handed off a malformed minion record: ignored`);
        continue;
      }
      const key = minionOutboxKey(r.k, r.id);
      if (!tables.has(r.k)) {
        const ring = this.d.route(dataTypeOf(r.k));
        tables.set(r.k, ring === null ? undefined : this.d.localTable(ring));
      }
      const t = tables.get(r.k);
      if (!t || !tableUsable(t)) throw new BrineError("PLACEMENT_NO_TABLE", `${this.d.self} has no table of the ring ${dataTypeOf(r.k)} is routed to`);
      if (!ownersOf(t, r.id).includes(this.d.self)) {
        refused.push(key);
        continue;
      }
      // an older record than the one held is acknowledged all the same: the owner has the newer
      writes.push(c.applyPeer(r));
      ok.push(key);
    }
    await Promise.all(writes);
    await this.d.store().root.flushed;
    return { ok, refused };
  }
}
