/**
 * Job placement's decisions, sans I/O (the hand-off shell is src/workers/raft/job-handoff.ts):
 *
 * - **Owners.** When `jobs` is routed to a ring, a jid's owners are, under the ring's policy `voters`, the
 *   first `replicas` nodes of the jid's preference order in the ring's slot table (the same order the shared
 *   ring's RingReader.replicas gives, computed here from a table fetched from a host of the ring when this
 *   master does not host it); under `self`, every voter of the ring: its Raft group's voters now, which follow
 *   the cluster's (hostTable), as in Salt every master hosting the ring owns every key under `self`.
 * - **A hand-off round.** The outbox (`jobs/handoff`) holds one key per record written on this master while
 *   jobs were placed: `<jid>` (load, minions, end time, nocache) or `<jid>/<id>` (a return), each with a
 *   stamp. planRound groups a batch of outbox keys by jid and by owner to send to (never to self);
 *   settleRound says, once the owners answered, which keys are settled: every owner other than self
 *   acknowledged the jid (durably stored). A settled key leaves the outbox if its stamp did not change
 *   meanwhile, and its record leaves this master when this master is not one of the jid's owners.
 *   A jid whose owners are unknown (no table yet) stays for the next round.
 * - **Cluster-wide lists.** NewestJobs merges every master's list, read page by page newest first, into the
 *   newest `max` jobs, holding no more than those and one page per master.
 * - **Rebalancing.** When a ring's table changes (sameOwnership false), each jid this master must hand on
 *   (mustHandOn: it is no longer an owner, or an owner is new) goes back in its outbox, and the hand-off moves it.
 */
import { preferenceOrder } from "./sab-ring/assign.js";
import { hashString, nodeHash } from "./sab-ring/hash.js";
import { NO_OWNER, ringSlots } from "./sab-ring/layout.js";

/** What a master knows of a ring to place keys on it. */
export interface PlacementTable {
  ring: string;
  members: "self" | "voters";
  replicas: number;
  /** the ring's voters (owners of every key under `self`) */
  voters: readonly string[];
  /** the slot table under `voters`: sorted node ids and, per slot, the owner's index (ringSlots bytes) */
  nodes: readonly string[];
  owners: Uint8Array;
  /** the ring's epoch at the host the table came from (diagnostics) */
  epoch: number;
}

/**
 * A host's table of `ring` (this master runs the ring's group), undefined when it has none: the ring is not
 * active, this master is not one of its founders, its policy is not applied yet, or (`voters`) the shared ring
 * holds no slot table of it yet. Under `self` the owners are the ring group's voters now (`groupVoters`: they
 * follow the cluster's voters, GroupManager.followRingVoters), the founders while the group's are not known.
 */
export function hostTable(a: {
  ring: string;
  self: string;
  record: { founding_voters: readonly string[]; status: string } | undefined;
  members: "self" | "voters" | undefined;
  replicas: number | undefined;
  /** the voters of the ring's Raft group on this master, undefined when it does not run it */
  groupVoters: readonly string[] | undefined;
  /** the ring's slot table in the shared ring, as this master publishes it */
  view: { nodes: readonly string[]; owners: Uint8Array; epoch: number; replicas: number } | null | undefined;
  /** the ring's epoch in the shared ring (diagnostics) */
  epoch: number;
}): PlacementTable | undefined {
  if (a.record?.status !== "active" || !a.record.founding_voters.includes(a.self) || a.members === undefined) return undefined;
  if (a.members === "self") {
    const voters = [...(a.groupVoters && a.groupVoters.length > 0 ? a.groupVoters : a.record.founding_voters)].sort();
    return { ring: a.ring, members: "self", replicas: a.replicas ?? 1, voters, nodes: [], owners: new Uint8Array(0), epoch: a.epoch };
  }
  const v = a.view;
  if (!v || v.nodes.length === 0) return undefined;
  return { ring: a.ring, members: "voters", replicas: a.replicas ?? v.replicas, voters: v.nodes, nodes: v.nodes, owners: v.owners, epoch: v.epoch };
}

/** A table is usable when it can name owners: `self` with voters, `voters` with a full slot table. */
export function tableUsable(t: PlacementTable): boolean {
  if (t.members === "self") return t.voters.length > 0;
  return t.nodes.length > 0 && t.owners.length === ringSlots && t.replicas >= 1;
}

/** The owners of `jid` under table `t` (sorted), [] when the table cannot say. */
export function ownersOf(t: PlacementTable, jid: string): string[] {
  if (!tableUsable(t)) return [];
  if (t.members === "self") return [...t.voters].sort();
  const slot = hashString(jid) & (ringSlots - 1);
  const o = t.owners[slot]!;
  if (o === NO_OWNER || o >= t.nodes.length) return [];
  const want = Math.min(t.replicas, t.nodes.length);
  return preferenceOrder(t.nodes, t.nodes.map(nodeHash), o, slot)
    .slice(0, want)
    .map((i) => t.nodes[i]!)
    .sort();
}

/** Whether two tables name the same owners for every key (same policy, replicas, voters and slot table). */
export function sameOwnership(a: PlacementTable, b: PlacementTable): boolean {
  if (a.ring !== b.ring || a.members !== b.members || a.replicas !== b.replicas) return false;
  const same = (x: readonly string[], y: readonly string[]) => x.length === y.length && x.every((v, i) => v === y[i]);
  if (a.members === "self") return same([...a.voters].sort(), [...b.voters].sort());
  if (!same(a.nodes, b.nodes) || a.owners.length !== b.owners.length) return false;
  for (let i = 0; i < a.owners.length; i++) if (a.owners[i] !== b.owners[i]) return false;
  return true;
}

/**
 * Rebalancing: whether `jid`'s copies must move after the ring's table went from `prev` to `next` (its owners
 * differ). A jid the new table cannot place (no usable table) does not move yet.
 */
export function ownersMoved(prev: PlacementTable, next: PlacementTable, jid: string): boolean {
  const now = ownersOf(next, jid);
  if (now.length === 0) return false;
  const before = ownersOf(prev, jid);
  return before.length !== now.length || before.some((o, i) => o !== now[i]);
}

/**
 * Rebalancing on master `self`: whether its copy of `jid` goes back to the hand-off after the table went from
 * `prev` to `next`: `self` is no longer among the owners (it hands the job on, then drops it), or an owner is
 * new (it may lack the job). An owner before and after whose co-owners only shrank sends nothing: the others
 * were owners too and hold it. A jid the new table cannot place does not move yet.
 */
export function mustHandOn(prev: PlacementTable, next: PlacementTable, jid: string, self: string): boolean {
  const now = ownersOf(next, jid);
  if (now.length === 0) return false;
  if (!now.includes(self)) return true;
  const before = ownersOf(prev, jid);
  return now.some((o) => !before.includes(o));
}

/** The jid of an outbox key (`<jid>` or `<jid>/<id>`). */
export function outboxJid(key: string): string {
  const slash = key.indexOf("/");
  return slash < 0 ? key : key.slice(0, slash);
}

export interface RoundPlan {
  /** jid -> its owners and the outbox keys of this round (with the stamps read) */
  jobs: Map<string, { owners: string[]; keys: [string, number][] }>;
  /** peer -> the jids to send it */
  byPeer: Map<string, string[]>;
  /** jids whose owners could not be named this round (left in the outbox) */
  unplaced: string[];
}

/**
 * Groups outbox entries by jid and by the owners (other than `self`) they go to. `groupOf` names an entry's
 * group (a job's: its jid; a minion record's, src/shared/minion-placement.ts: its own key); `owners` gets it.
 */
export function planRound(entries: readonly [string, number][], owners: (jid: string) => string[], self: string, groupOf: (key: string) => string = outboxJid): RoundPlan {
  const jobs = new Map<string, { owners: string[]; keys: [string, number][] }>();
  const unplaced: string[] = [];
  const unknown = new Set<string>();
  for (const [key, stamp] of entries) {
    const jid = groupOf(key);
    if (unknown.has(jid)) continue;
    let j = jobs.get(jid);
    if (!j) {
      const o = owners(jid);
      if (o.length === 0) {
        unknown.add(jid);
        unplaced.push(jid);
        continue;
      }
      jobs.set(jid, (j = { owners: o, keys: [] }));
    }
    j.keys.push([key, stamp]);
  }
  const byPeer = new Map<string, string[]>();
  for (const [jid, j] of jobs) {
    for (const o of j.owners) {
      if (o === self) continue;
      let l = byPeer.get(o);
      if (!l) byPeer.set(o, (l = []));
      l.push(jid);
    }
  }
  return { jobs, byPeer, unplaced };
}

export interface Settlement {
  /** outbox keys to remove (if their stamp is unchanged), with the stamp read */
  settled: [string, number][];
  /** of those, the keys whose record this master drops (it is not among the jid's owners) */
  drop: Set<string>;
  /** jids some owner did not acknowledge (kept for the next round) */
  pending: string[];
}

/** Which keys of a round are settled, given the jids each peer acknowledged (absent: the peer failed). */
export function settleRound(plan: RoundPlan, acked: ReadonlyMap<string, ReadonlySet<string>>, self: string): Settlement {
  const settled: [string, number][] = [];
  const drop = new Set<string>();
  const pending: string[] = [];
  for (const [jid, j] of plan.jobs) {
    const all = j.owners.every((o) => o === self || acked.get(o)?.has(jid) === true);
    if (!all) {
      pending.push(jid);
      continue;
    }
    const keep = j.owners.includes(self);
    for (const k of j.keys) {
      settled.push(k);
      if (!keep) drop.add(k[0]);
    }
  }
  return { settled, drop, pending };
}

/** One master's copy of one job (the `read` answer of the placement channel). */
export interface JobCopy {
  load?: Record<string, unknown>;
  minions?: string[];
  endtime?: string;
  nocache?: boolean;
  /** minion id -> its stored return record */
  returns: Record<string, Record<string, unknown>>;
}

/**
 * One job as the cluster holds it, from every master's copy that answered: the first load found, the union of
 * expected minions, the end time, nocache if any copy says so, every return (a return is written once per
 * (jid, minion) and never changes, so copies agree).
 */
export function mergeCopies(copies: readonly JobCopy[]): JobCopy {
  const out: JobCopy = { returns: {} };
  const minions = new Set<string>();
  let anyMinions = false;
  for (const c of copies) {
    if (c.load && !out.load) out.load = c.load;
    if (c.minions) {
      anyMinions = true;
      for (const m of c.minions) minions.add(m);
    }
    if (c.endtime !== undefined && (out.endtime === undefined || c.endtime > out.endtime)) out.endtime = c.endtime;
    if (c.nocache) out.nocache = true;
    for (const [id, r] of Object.entries(c.returns)) if (!(id in out.returns)) out.returns[id] = r;
  }
  if (anyMinions) out.minions = [...minions].sort();
  return out;
}

/** One job of a master's `list` answer: [jid, load, expected minions, end time]. */
export type ListedJob = [string, Record<string, unknown>, string[] | null, string | null];

/** Every master's list merged: jid order, one entry per jid (copies merged as mergeCopies does). */
export function mergeLists(lists: readonly (readonly ListedJob[])[]): ListedJob[] {
  const by = new Map<string, ListedJob>();
  for (const l of lists) {
    for (const [jid, load, minions, endtime] of l) {
      const have = by.get(jid);
      if (!have) {
        by.set(jid, [jid, load, minions ? [...minions] : null, endtime]);
        continue;
      }
      if (minions) have[2] = [...new Set([...(have[2] ?? []), ...minions])].sort();
      if (endtime !== null && (have[3] === null || endtime > have[3])) have[3] = endtime;
    }
  }
  return [...by.values()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

/**
 * The newest `max` jobs of several masters' lists, each read page by page newest first (a cluster-wide
 * list_jobs): a k-way merge that holds at most `max` merged jobs and one page per master, whatever the lists'
 * lengths. The shell feeds each source's pages (`feed`, oldest first as a `list` page comes) while `wanting()`
 * names sources whose next page is needed, and calls `take()` after each batch of pages; `result()` once
 * `take()` says "done". One jid on several masters is one job (merged as mergeLists does).
 */
export class NewestJobs {
  /** per source: its unread jobs, newest last (popped from the end), and whether pages are left */
  private readonly queues: ListedJob[][];
  private readonly more: boolean[];
  /** merged jobs, newest first */
  private readonly out: ListedJob[] = [];
  private cut = false;

  constructor(
    sources: number,
    private readonly max: number,
  ) {
    this.queues = Array.from({ length: sources }, () => []);
    this.more = Array.from({ length: sources }, () => true);
  }

  /** One page of source `i` (oldest first, as a `list` page is answered); `more`: the source has older pages. */
  feed(i: number, page: readonly ListedJob[], more: boolean): void {
    // a page answered oldest first is newest last: the queue pops its newest from the end
    const q = this.queues[i]!;
    const older = [...page];
    this.queues[i] = q.length === 0 ? older : [...older, ...q];
    this.more[i] = more;
  }

  /** Source `i` gives nothing more (finished, or failed: what it gave stays merged). */
  end(i: number): void {
    this.more[i] = false;
  }

  /** Sources whose next page is needed before the merge can go on. */
  wanting(): number[] {
    if (this.finished()) return [];
    const w: number[] = [];
    for (let i = 0; i < this.queues.length; i++) if (this.queues[i]!.length === 0 && this.more[i]) w.push(i);
    return w;
  }

  /** Merges what can be merged now: "need" (feed the sources `wanting()` names) or "done". */
  take(): "need" | "done" {
    while (this.out.length < this.max) {
      if (this.wanting().length > 0) return "need";
      let newest: string | undefined;
      for (const q of this.queues) {
        const head = q[q.length - 1];
        if (head && (newest === undefined || head[0] > newest)) newest = head[0];
      }
      if (newest === undefined) return "done";
      const same: ListedJob[] = [];
      for (const q of this.queues) if (q.length > 0 && q[q.length - 1]![0] === newest) same.push(q.pop()!);
      this.out.push(mergeLists(same.map((j) => [j]))[0]!);
    }
    this.cut = this.queues.some((q, i) => q.length > 0 || this.more[i]);
    return "done";
  }

  private finished(): boolean {
    return this.out.length >= this.max;
  }

  /** The merged jobs in jid order (oldest first), and whether older jobs were left out (more than `max`). */
  result(): { jobs: ListedJob[]; truncated: boolean } {
    return { jobs: [...this.out].reverse(), truncated: this.cut };
  }
}
