/**
 * The way back to broadcast of the minion banks (data type `grains`: minions/data; `mine`: minions/mine), in the
 * Raft worker beside their placement on a ring's owners (minion-placement.ts, which hands this the outbox keys of
 * banks no longer routed and the `spread` requests it is served; decisions in src/shared/minion-placement.ts).
 * Peer channel `raft/minions` (minion-wire.ts):
 *
 * - **Gather**: once a bank's data type is routed to no ring again while this master's copies were placed
 *   (mustGather: its `jobs/placed-by` marks of the bank are left), this master pulls from every other master the
 *   records it lacks or holds older (`stamps` pages, then `records`), and drops its marks once every master was
 *   pulled from in full; a master down is pulled from again every gatherRetryMs.
 * - **Spread**: outbox keys of a bank no longer routed are sent to every master (`spread`) instead of to owners.
 * - **Collect**: the same pull serves cluster.collect_from_peers of `minions/data`, `minions/mine`, refused while
 *   the bank is placed.
 * - **Shed** (cluster.shed_unowned of a minion bank): a record not owned here is dropped only when an owner
 *   answers (`stamps`) that it holds it as new (planMinionShed); the possibly only copy stays.
 */
import { BrineError } from "../../shared/errors.js";
import { cbor } from "../../shared/cbor.js";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { ownersOf, tableUsable } from "../../shared/placement.js";
import {
  dataTypeOf,
  minionOutboxKey,
  mustGather,
  parseMinionOutboxKey,
  placedByPrefix,
  placedMarkKey,
  planMinionShed,
  wantedFrom,
  type MinionAnswer,
  type MinionBank,
  type MinionRecord,
  type MinionShedAnswer,
  type PullReport,
} from "../../shared/minion-placement.js";
import type { Stamp } from "../../shared/sync-records.js";
import type { MinionCache } from "../../lib/store/minion-cache.js";
import { byteBatches } from "./job-placement.js";
import { lacksKind } from "./peer-kinds.js";
import { askPeer, checkRecord, checkRecordsAnswer, checkStampsAnswer, MINION_PLACEMENT_CHANNEL, minionRequestBytesMax, readIdsPerRequestMax, type MinionPlacementDeps } from "./minion-wire.js";

/** a gather (the way back to broadcast) that could not pull from every master is tried again after, ms */
export const gatherRetryMs = 5_000;

const log = getLogger("brine.cluster.placement");
const spreadLog = new LogBudget(1, 10_000, (line) => log.warning(line), "minion data spread");
const gatherLog = new LogBudget(1, 30_000, (line) => log.warning(line), "minion data back to broadcast");
export const BANKS: readonly MinionBank[] = ["data", "mine"];

/** finished collect_from_peers kept for a caller still to ask for their report, count */
export const collectKeptMax = 16;

/** A collect_from_peers of one bank (MinionBroadcast.collect). */
interface Collection {
  id: number;
  bank: MinionBank;
  /** by master pulled from: what it gave so far (`in_flight` until its pull ended) */
  reports: Record<string, PullReport>;
  /** peers' answers so far, across masters (the caller's measure of progress) */
  requests: number;
  finished: boolean;
  done: Promise<unknown>;
}

/** What one gather pass of a bank did (MinionBroadcast.gather). */
export interface GatherReport {
  bank: MinionBank;
  /** every other master was pulled from, or cannot take part: the bank's marks went */
  complete: boolean;
  /** masters pulled from in full since the gather began */
  pulled: string[];
  /** records stored in this pass */
  items: number;
  /** masters to pull from again (down, failing), with why */
  waiting: Record<string, string>;
  /** masters that cannot take part (another version: they do not know `stamps`), with why */
  unable: Record<string, string>;
}

export class MinionBroadcast {
  private readonly now: () => number;
  /** per bank being gathered (back to broadcast): the masters pulled from in full since the gather began */
  private readonly gathered = new Map<MinionBank, Set<string>>();
  private gatherBusy = false;
  /** outbox keys of banks back to broadcast being spread: their outbox stamp and the masters that acknowledged them */
  private spreadTo = new Map<string, { stamp: number; peers: Set<string> }>();
  private lastGather = -Infinity;
  /** per bank being gathered: masters that cannot take part (lacksKind), with why */
  private readonly unable = new Map<MinionBank, Map<string, string>>();
  /** masters told (logged once) not to know `spread` */
  private readonly toldNoSpread = new Set<string>();
  /** collect_from_peers of a bank under way (one per bank) */
  private readonly collecting = new Map<MinionBank, Collection>();
  /**
   * the next collect_from_peers of a bank, for calls made while one is under way: it starts when that one ends, so
   * that what it pulls is no older than the calls (the one under way may have read a peer's stamps before a record
   * the caller wrote there); every call meanwhile shares it
   */
  private readonly queuedCollect = new Map<MinionBank, Collection>();
  /** collections by id, under way and the last collectKeptMax finished */
  private readonly collections = new Map<number, Collection>();
  private nextCollect = 1;
  /** per bank: the masters its last gather ended without, until a collect_from_peers pulls from them */
  private readonly without = new Map<MinionBank, Map<string, string>>();
  /** per bank: pulls from peers under way (gather, collect), which may still store records this master does not own */
  private readonly pulls = new Map<MinionBank, number>();

  constructor(
    private readonly d: MinionPlacementDeps,
    private readonly cache: () => MinionCache,
  ) {
    this.now = d.now ?? Date.now;
  }
  /**
   * Outbox keys of a bank no longer routed to a ring (the route was cleared while they waited): the record goes to
   * every other master, as a broadcast write would have (`spread`; each keeps the newest by stamp), since a master
   * that already gathered from this one would not see it. The keys whose record every other master acknowledged
   * (or that have no record: nothing to spread) are returned, to leave the outbox; the others wait for a master
   * that is down or still routes the bank, and go again next round.
   */
  async spread(unrouted: readonly [string, number][]): Promise<[string, number][]> {
    if (unrouted.length === 0) return [];
    const c = this.cache();
    const records = new Map<string, MinionRecord>();
    const done: [string, number][] = [];
    for (const e of unrouted) {
      const k = parseMinionOutboxKey(e[0]);
      const r = k ? c.record(k.bank, k.id) : undefined;
      if (r) records.set(e[0], r);
      else done.push(e);
    }
    if (records.size === 0) return done;
    // which masters already have each key's record (as of its outbox stamp): only the others are sent it again
    const spreadNow = new Map<string, { stamp: number; peers: Set<string> }>();
    for (const [key, stamp] of unrouted) {
      const had = this.spreadTo.get(key);
      if (records.has(key)) spreadNow.set(key, had && had.stamp === stamp ? had : { stamp, peers: new Set() });
    }
    this.spreadTo = spreadNow;
    const peers = this.d.peers();
    await Promise.all(
      peers.map(async (peer) => {
        if (!this.d.up(peer)) return;
        const owed = [...records].filter(([key]) => !spreadNow.get(key)!.peers.has(peer)).map(([, r]) => r);
        for (const batch of byteBatches(owed, minionRequestBytesMax)) {
          try {
            const a = cbor.decode(await this.d.channel.request(peer, MINION_PLACEMENT_CHANNEL, cbor.encode({ op: "spread", items: batch }) as Uint8Array, this.d.timeoutMs)) as { ok?: unknown };
            if (Array.isArray(a?.ok)) for (const key of a.ok) if (typeof key === "string") spreadNow.get(key)?.peers.add(peer);
          } catch (e) {
            if (lacksKind(e, "spread")) {
              // another version: it cannot take these records; not waited for (they would wait in the outbox for ever)
              for (const r of owed) spreadNow.get(minionOutboxKey(r.k, r.id))?.peers.add(peer);
              if (!this.toldNoSpread.has(peer)) log.warning(`${peer} does not know ${MINION_PLACEMENT_CHANNEL} "spread" (it runs an older brine): the minion records waiting in ${this.d.self}'s outbox for a bank back to broadcast are not sent to it`);
              this.toldNoSpread.add(peer);
              break;
            }
            spreadLog.line(`spreading ${batch.length} minion records to ${peer} (their bank is back to broadcast) failed, retried next round: ${(e as Error).message}`);
            break;
          }
        }
      }),
    );
    for (const e of unrouted) if (records.has(e[0]) && peers.every((p) => spreadNow.get(e[0])!.peers.has(p))) done.push(e);
    if (done.length < unrouted.length) spreadLog.line(`${unrouted.length - done.length} minion records of a bank back to broadcast wait in the outbox of ${this.d.self} for masters that are down or still route it`);
    return done;
  }

  // --- gather, collect_from_peers, shed_unowned -------------------------------------------------------------

  /** The `jobs/placed-by` keys of `bank` (one per ring its copies were placed on). */
  private placedByKeys(bank: MinionBank): string[] {
    const prefix = placedByPrefix(bank);
    const out: string[] = [];
    for (const k of this.d.store().placedBy.getKeys({ start: prefix, end: `${prefix}\uffff` })) out.push(k as string);
    return out;
  }

  /**
   * Whether a pull of `bank` from a peer is under way here: a placement scan of the bank waits for it to end,
   * or records it stores after the scan walked past them would stay on a master that does not own them.
   */
  pulling(bank: MinionBank): boolean {
    return (this.pulls.get(bank) ?? 0) > 0;
  }

  /** Whether this master still gathers `bank` (back to broadcast, not every master pulled from yet). */
  gatheringNow(bank: MinionBank): boolean {
    return mustGather(this.d.route(dataTypeOf(bank)), this.placedByKeys(bank));
  }

  /**
   * On every tick of the worker's timer: starts a gather of the banks back to broadcast, at once, then every
   * gatherRetryMs while one is incomplete. Returns whether a gather runs, is due or was tried within gatherRetryMs.
   */
  tick(): boolean {
    if (this.gatherBusy || this.now() - this.lastGather < gatherRetryMs) return true;
    const banks = BANKS.filter((b) => this.gatheringNow(b));
    if (banks.length === 0) return false;
    this.lastGather = this.now();
    this.gatherBusy = true;
    (async () => {
      for (const b of banks) await this.gather(b);
    })()
      .catch((e: unknown) => gatherLog.line(`gathering minion records back to broadcast failed, tried again in ${gatherRetryMs / 1000} s: ${(e as Error)?.message ?? String(e)}`))
      .finally(() => (this.gatherBusy = false));
    return true;
  }

  /**
   * The way back to broadcast (mustGather): pulls from every other master the records of `bank` this master lacks
   * or holds older (each master held only the ids it owned). Once every master was pulled from in full, the
   * bank's `jobs/placed-by` keys go: this master holds every record, and later writes are broadcast again. A
   * master down or failing is pulled from again every gatherRetryMs (logged); one restarted mid-gather starts over.
   * A master that answers it does not know `stamps` (another version: lacksKind) cannot take part: it is not
   * waited for, the gather ends without its records (named in the report, `unable`; logged once), and
   * this master's `ids` answer names it (`gathered_without`) until a collect_from_peers pulls from it.
   */
  async gather(bank: MinionBank): Promise<GatherReport> {
    let done = this.gathered.get(bank);
    if (!done) this.gathered.set(bank, (done = new Set()));
    let unable = this.unable.get(bank);
    if (!unable) this.unable.set(bank, (unable = new Map()));
    const peers = this.d.peers();
    const waiting: Record<string, string> = {};
    let items = 0;
    // the copies stop being placed by the tables they were placed by (the mark stays until the gather is done): a
    // route set again, to the same ring too, starts a placement scan of what the pulls bring (MinionPlacement.scan)
    const tables = this.placedByKeys(bank).filter((k) => k !== placedMarkKey(bank));
    if (tables.length > 0) {
      const s = this.d.store();
      await s.root.transaction(() => {
        for (const k of tables) s.placedBy.removeSync(k);
      });
    }
    for (const p of peers) {
      if (done.has(p) || unable.has(p)) continue;
      if (!this.d.up(p)) {
        waiting[p] = "down";
        continue;
      }
      try {
        items += (await this.pullFrom(p, bank)).items;
        done.add(p);
      } catch (e) {
        if (!lacksKind(e, "stamps")) {
          waiting[p] = (e as Error).message;
          continue;
        }
        unable.set(p, `${p} does not know ${MINION_PLACEMENT_CHANNEL} "stamps" (it runs an older brine)`);
        log.warning(`${dataTypeOf(bank)} is back to broadcast, but ${p} cannot take part in ${this.d.self}'s gather: it does not know ${MINION_PLACEMENT_CHANNEL} "stamps" (it runs an older brine); the records only ${p} holds are not pulled: upgrade it, then run cluster.collect_from_peers banks=minions/${bank} on ${this.d.self}`);
      }
    }
    const report = (complete: boolean): GatherReport => ({ bank, complete, pulled: [...done].sort(), items, waiting, unable: Object.fromEntries(unable) });
    if (Object.keys(waiting).length > 0) {
      gatherLog.line(`${dataTypeOf(bank)} is back to broadcast, but ${this.d.self} could not yet pull the records it lacks from ${Object.entries(waiting).map(([p, why]) => `${p} (${why})`).join(", ")}: asked again every ${gatherRetryMs / 1000} s`);
      return report(false);
    }
    // routed again meanwhile: the placement scan owns the placed-by keys now
    if (this.d.route(dataTypeOf(bank)) !== null) return report(false);
    const s = this.d.store();
    const keys = this.placedByKeys(bank);
    await s.root.transaction(() => {
      for (const k of keys) s.placedBy.removeSync(k);
    });
    this.gathered.delete(bank);
    this.unable.delete(bank);
    if (unable.size > 0) this.without.set(bank, new Map(unable));
    else this.without.delete(bank);
    log.info(`${dataTypeOf(bank)} is back to broadcast: ${this.d.self} pulled the records it lacked from ${[...done].join(", ") || "no other master"} (${items} stored in this pass)${unable.size > 0 ? `, not from ${[...unable.keys()].join(", ")} (cannot take part)` : " and holds every minion's record now"}`);
    return report(true);
  }

  /** The masters the last gather of `bank` ended without (they cannot take part), with why: HeldIds.gathered_without. */
  gatheredWithout(bank: MinionBank): Record<string, string> | undefined {
    const w = this.without.get(bank);
    return w && w.size > 0 ? Object.fromEntries(w) : undefined;
  }

  /** This master's stamp of `id` in `bank` (a record never stamped: (0, this master)). */
  private localStamp(bank: MinionBank, id: string): Stamp | undefined {
    const e = this.cache().stampsOf(bank, [id], this.d.self)[0];
    return e ? { t: e[1], o: e[2] } : undefined;
  }

  /**
   * Pulls `bank` from `peer`: its stamps page by page (stampsPageMax), then the records it holds newer than this
   * master's (wantedFrom), stored when still newer (last writer wins). Throws when `peer` stops answering.
   */
  async pullFrom(peer: string, bank: MinionBank, progress?: (items: number, bytes: number) => void): Promise<{ items: number; bytes: number }> {
    this.pulls.set(bank, (this.pulls.get(bank) ?? 0) + 1);
    try {
      return await this.pullPages(peer, bank, progress);
    } finally {
      this.pulls.set(bank, this.pulls.get(bank)! - 1);
    }
  }

  private async pullPages(peer: string, bank: MinionBank, progress?: (items: number, bytes: number) => void): Promise<{ items: number; bytes: number }> {
    const c = this.cache();
    let after: string | undefined;
    let items = 0;
    let bytes = 0;
    for (;;) {
      const page = checkStampsAnswer(await askPeer(this.d, peer, { op: "stamps", bank, ...(after !== undefined ? { after } : {}) }));
      progress?.(items, bytes);
      const want = wantedFrom(page.entries, (id) => this.localStamp(bank, id));
      for (let i = 0; i < want.length; i += readIdsPerRequestMax) {
        let ask = want.slice(i, i + readIdsPerRequestMax);
        while (ask.length > 0) {
          const raw = await this.d.channel.request(peer, MINION_PLACEMENT_CHANNEL, cbor.encode({ op: "records", bank, ids: ask }) as Uint8Array, this.d.timeoutMs);
          bytes += raw.byteLength;
          const a = checkRecordsAnswer(cbor.decode(raw), bank);
          for (const stored of await Promise.all(a.records.map((r) => c.applyPeer(r)))) if (stored) items++;
          progress?.(items, bytes);
          if (a.rest.length >= ask.length) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", `${peer}'s records answer did not advance`);
          ask = a.rest;
        }
      }
      if (page.next === undefined) return { items, bytes };
      if (after !== undefined && page.next <= after) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", `${peer}'s stamps page cursor did not advance`);
      after = page.next;
    }
  }

  /**
   * cluster.collect_from_peers of `bank`: a pull from every other master, reported per master. It runs here for
   * as long as it takes; a call starts it (or, while one of the bank is under way, the next one, which starts when
   * that one ends; calls meanwhile share it) and waits for it at most
   * `waitMs` (under the caller's call deadline), then answers what it did so far (`collect.done` false: the
   * masters still pulled from are `in_flight`, and `collect.requests`, the peers' answers so far, shows progress);
   * the caller asks again with the collection's `id` until it is done. A finished collection's report is kept for
   * the last collectKeptMax collections.
   */
  async collect(bank: MinionBank, id?: number, waitMs = Infinity): Promise<MinionAnswer> {
    let c = id !== undefined ? this.collections.get(id) : this.queuedCollect.get(bank);
    if (id !== undefined && (!c || c.bank !== bank)) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", `no collection ${id} of minions/${bank} on ${this.d.self} (it finished more than ${collectKeptMax} collections ago, or this master restarted)`);
    if (!c) {
      const ring = this.d.route(dataTypeOf(bank));
      if (ring !== null) {
        throw new BrineError("MINION_PLACEMENT_PLACED", `${dataTypeOf(bank)} is routed to ring ${ring}: each record lives on its owners, and copies collected here would be held by no rule; run cluster.route_clear ${dataTypeOf(bank)} (every master then pulls what it lacks by itself)`);
      }
      c = this.startCollect(bank, this.collecting.get(bank)?.done);
    }
    if (!c.finished && waitMs > 0) {
      let t: NodeJS.Timeout | undefined;
      await Promise.race([c.done, ...(waitMs !== Infinity ? [new Promise<void>((r) => (t = setTimeout(r, waitMs)))] : [])]);
      clearTimeout(t);
    }
    const collected: Record<string, PullReport> = {};
    for (const [p, r] of Object.entries(c.reports)) collected[p] = { ...r, errors: [...r.errors], ...(r.failed ? { failed: [...r.failed] } : {}) };
    return { collected, collect: { id: c.id, done: c.finished, requests: c.requests }, unreachable: {} };
  }

  /** A collection of `bank`, started now or, with `after`, once `after` (the one under way) has ended. */
  private startCollect(bank: MinionBank, after?: Promise<unknown>): Collection {
    const name = `bank:minions/${bank}`;
    const c: Collection = { id: this.nextCollect++, bank, reports: {}, requests: 0, finished: false, done: Promise.resolve() };
    for (const p of this.d.peers()) c.reports[p] = { items: 0, bytes: 0, errors: [], ms: 0, in_flight: true };
    const run = () => this.runCollect(c, name);
    if (after) {
      this.queuedCollect.set(bank, c);
      c.done = after.then(run, run);
    } else c.done = run();
    this.collections.set(c.id, c);
    for (const old of this.collections.keys()) {
      if (this.collections.size <= collectKeptMax) break;
      if (this.collections.get(old)!.finished) this.collections.delete(old);
    }
    return c;
  }

  private runCollect(c: Collection, name: string): Promise<unknown> {
    const bank = c.bank;
    if (this.queuedCollect.get(bank) === c) this.queuedCollect.delete(bank);
    this.collecting.set(bank, c);
    const t0 = this.now();
    return Promise.all(
      Object.keys(c.reports).map(async (p) => {
        const report = c.reports[p]!;
        const end = (r: PullReport) => (c.reports[p] = { ...r, ms: this.now() - t0 });
        if (!this.d.up(p)) return end({ items: 0, bytes: 0, errors: ["not connected"], ms: 0, failed: [name] });
        try {
          const r = await this.pullFrom(p, bank, (items, bytes) => {
            c.requests++;
            report.items = items;
            report.bytes = bytes;
            report.ms = this.now() - t0;
          });
          end({ ...r, errors: [], ms: 0 });
          this.without.get(bank)?.delete(p);
        } catch (e) {
          const why = lacksKind(e, "stamps") ? `${p} cannot take part: it does not know ${MINION_PLACEMENT_CHANNEL} "stamps" (it runs an older brine)` : (e as Error).message;
          end({ items: report.items, bytes: report.bytes, errors: [`${name}: ${why}`], ms: 0, failed: [name] });
        }
      }),
    ).then(() => {
      c.finished = true;
      if (this.collecting.get(bank) === c) this.collecting.delete(bank);
      const pulled = Object.values(c.reports).reduce((n, r) => n + r.items, 0);
      log.info(`collect_from_peers ${name}: ${pulled} record(s) stored from ${Object.keys(c.reports).join(", ") || "no other master"} in ${((this.now() - t0) / 1000).toFixed(1)} s`);
    });
  }

  /**
   * cluster.shed_unowned of `bank` on this master, under the ring `bank`'s data type is routed to: a record this
   * master does not own is dropped only when one of its owners answered that it holds it as new or newer
   * (planMinionShed); the rest is kept and counted (`kept_sole_copy`).
   */
  async shed(ring: string, bank: MinionBank, dryRun: boolean): Promise<MinionAnswer> {
    const skip = (reason: string): MinionAnswer => ({ shed: { status: "skipped", dropped: 0, kept: 0, kept_sole_copy: 0, reason }, unreachable: {} });
    const route = this.d.route(dataTypeOf(bank));
    if (route !== ring) return skip(`${dataTypeOf(bank)} is routed to ${route === null ? "no ring (broadcast: every master keeps every record)" : `ring ${route}`}, not to ${ring}`);
    const t = this.d.localTable(ring);
    if (!t || !tableUsable(t)) return skip(`${this.d.self} is not a voter of ring ${ring}, or has no slot table of it yet`);
    const s = this.d.store();
    const db = bank === "data" ? s.minionData : s.mine;
    const ids: string[] = [];
    for (const id of db.getKeys()) ids.push(id as string);
    const owners = (id: string) => ownersOf(t, id);
    // ask each owner, once, for its stamps of the ids this master does not own
    const unowned = ids.filter((id) => !owners(id).includes(this.d.self));
    const byOwner = new Map<string, string[]>();
    for (const id of unowned) for (const o of owners(id)) if (o !== this.d.self) (byOwner.get(o) ?? byOwner.set(o, []).get(o)!).push(id);
    const held = new Map<string, Map<string, Stamp>>();
    const unreachable: Record<string, string> = {};
    await Promise.all(
      [...byOwner].map(async ([o, list]) => {
        const m = new Map<string, Stamp>();
        held.set(o, m);
        if (!this.d.up(o)) {
          unreachable[o] = "down (no peer session)";
          return;
        }
        try {
          for (let i = 0; i < list.length; i += readIdsPerRequestMax) {
            const a = checkStampsAnswer(await askPeer(this.d, o, { op: "stamps", bank, ids: list.slice(i, i + readIdsPerRequestMax) }));
            for (const [id, st, origin] of a.entries) m.set(id, { t: st, o: origin });
          }
        } catch (e) {
          unreachable[o] = (e as Error).message;
        }
      }),
    );
    const plan = planMinionShed({ ids, self: this.d.self, owners, mine: (id) => this.localStamp(bank, id), held: (o, id) => held.get(o)?.get(id) });
    let dropped = plan.drop.length;
    if (!dryRun && plan.drop.length > 0) {
      const c = this.cache();
      const stamps = new Map(plan.drop.map((id) => [id, this.localStamp(bank, id) ?? { t: 0, o: "" }]));
      dropped = await s.root.transaction(() => {
        let n = 0;
        // a write since the plan was made (a newer stamp) stays
        for (const id of plan.drop) if (c.dropSync(bank, id, stamps.get(id)!)) n++;
        return n;
      });
    }
    if (plan.sole.length > 0) log.warning(`shed_unowned ${ring} minions/${bank}: ${plan.sole.length} record(s) this master does not own kept: no owner${Object.keys(unreachable).length ? ` that answered (${Object.keys(unreachable).join(", ")} could not be asked)` : ""} holds them as new (e.g. ${plan.sole.slice(0, 5).join(", ")})`);
    const answer: MinionShedAnswer = { status: "ok", dropped, kept: ids.length - dropped, kept_sole_copy: plan.sole.length };
    return { shed: answer, unreachable };
  }



  /**
   * Stores the records of a bank back to broadcast a peer spreads (the newest by stamp; spread()); refused while
   * this master still routes the bank to a ring (the route's change not applied here yet: sent again).
   */
  async serveSpread(from: string, q: Record<string, unknown>): Promise<{ ok: string[] }> {
    if (!Array.isArray(q.items)) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "spread carries no items");
    const c = this.cache();
    const ok: string[] = [];
    const writes: Promise<boolean>[] = [];
    for (const raw of q.items) {
      const r = checkRecord(raw);
      if (!r) {
        spreadLog.line(`${from} spread a malformed minion record: ignored`);
        continue;
      }
      if (this.d.route(dataTypeOf(r.k)) !== null) continue;
      writes.push(c.applyPeer(r));
      ok.push(minionOutboxKey(r.k, r.id));
    }
    await Promise.all(writes);
    await this.d.store().root.flushed;
    return { ok };
  }
}
