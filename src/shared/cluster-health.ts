/**
 * What `salt-run cluster.health` reports and whether this master is ready (the readiness file
 * `cachedir/health/ready`, src/main-thread/readiness.ts), decided from facts handed in: the Raft worker's
 * status of group `cluster`, the peer-health board, the state-sync status file's content and the time.
 * Pure: no I/O, no clock. Beyond Salt (Salt has no health runner).
 *
 * Ready means: single master, serving; clustered, serving, a member of group `cluster` (voter, or learner)
 * that knows a leader and has applied its commit index to within `readyLagEntriesMax` entries. A learner
 * is ready on the same terms ("in sync"), except while its join's state-sync before promotion runs (`joining`):
 * a learner in the middle of that transfer is never ready.
 */

/** A follower this many committed entries behind in applying them is still caught up (entries in flight). */
export const readyLagEntriesMax = 64;

/** The part of the Raft worker's GroupStatus this module reads (src/workers/raft/api.ts). */
export interface HealthGroupFacts {
  role: string;
  leaderId: string | null;
  term: number;
  commit: number;
  applied: number;
  lastIndex: number;
  voters: readonly string[];
  learners: readonly string[];
  /** leader only: each member's replication progress */
  progress?: Record<string, { state: string; match: number; next: number }>;
}

export interface ReadinessFacts {
  clustered: boolean;
  /** the request port is bound and the master is not stopping */
  serving: boolean;
  nodeId?: string;
  /** group `cluster`, when this master hosts it */
  group?: HealthGroupFacts;
  /** a joining master not promoted yet: what it waits for (the peer-health board's `joining`) */
  joining?: string;
}

export interface Readiness {
  ready: boolean;
  /** why, in a few words (logged when it changes) */
  reason: string;
}

export function readiness(f: ReadinessFacts): Readiness {
  if (!f.serving) return { ready: false, reason: "not serving" };
  if (!f.clustered) return { ready: true, reason: "serving" };
  const g = f.group;
  if (!g) return { ready: false, reason: "no cluster group yet (founding or joining)" };
  const self = f.nodeId ?? "";
  const kind = g.voters.includes(self) ? "voter" : g.learners.includes(self) ? "learner" : undefined;
  if (!kind) return { ready: false, reason: "not a member of the cluster group" };
  if (g.leaderId === null) return { ready: false, reason: `${kind} without a leader` };
  if (kind === "learner" && f.joining) return { ready: false, reason: `learner not in sync: ${f.joining}` };
  const lag = Math.max(0, g.commit - g.applied);
  if (lag > readyLagEntriesMax) return { ready: false, reason: `${kind} applying: ${lag} committed entries behind` };
  return { ready: true, reason: kind === "voter" ? (g.role === "leader" ? "leader" : "caught-up voter") : "learner in sync" };
}

/** One peer's last state-sync on one channel, as the state-sync thread writes it. */
/**
 * One channel from one peer in the state-sync status file: the last transfer (at: when it ended, or when the
 * entry was made for a peer announcing content before any transfer from it, with transfers 0), the sums since
 * the file was started (the metrics' counters), and behind_since (the metrics' lag).
 */
export interface StateSyncEntry {
  at: number | string;
  items: number;
  bytes: number;
  deleted: number;
  errors: number | unknown[];
  /** the pull found the channel's directory shared with that peer (nothing to carry) */
  shared?: boolean;
  /** sums over the transfers since the file was started (engine.ts StatusEntry) */
  items_total?: number;
  bytes_total?: number;
  transfers?: number;
  /** when the peer announced key content this master has not pulled yet, ISO 8601 */
  behind_since?: string;
}

export type StateSyncStatus = Record<string, Record<string, StateSyncEntry>>;

/**
 * Checks the parsed `cachedir/brine-state-sync/status.json` ({channel: {peer: {at, items, bytes, deleted,
 * errors}}}): the status itself, or an error text naming what is wrong.
 */
export function checkStateSyncStatus(v: unknown): { status: StateSyncStatus } | { error: string } {
  const isObj = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);
  if (!isObj(v)) return { error: "not a mapping of channels" };
  for (const [channel, peers] of Object.entries(v)) {
    if (!isObj(peers)) return { error: `channel ${channel}: not a mapping of peers` };
    for (const [peer, e] of Object.entries(peers)) {
      if (!isObj(e)) return { error: `channel ${channel}, peer ${peer}: not a mapping` };
      for (const k of ["items", "bytes", "deleted"] as const) if (typeof e[k] !== "number") return { error: `channel ${channel}, peer ${peer}: ${k} is not a number` };
      if (typeof e.at !== "number" && typeof e.at !== "string") return { error: `channel ${channel}, peer ${peer}: at is missing` };
      if (typeof e.errors !== "number" && !Array.isArray(e.errors)) return { error: `channel ${channel}, peer ${peer}: errors is missing` };
    }
  }
  return { status: v as StateSyncStatus };
}

/** The leader's view of every member's replication, as a follower asked it (src/workers/raft/leader-progress.ts). */
export interface LeaderProgressFacts {
  leaderId: string;
  commit: number;
  lastIndex: number;
  progress: Record<string, { match: number }>;
}

export interface HealthFacts extends ReadinessFacts {
  nodeId: string;
  /** peer-channel sessions (src/shared/peer-health.ts), when the channel runs */
  links?: Record<string, { up: boolean; since: number }>;
  /** the state-sync status file: absent, its content checked, or why it could not be read */
  stateSync?: { status: StateSyncStatus } | { error: string };
  /** on a follower: the leader's view of every member's replication, or why it could not be had */
  leaderView?: LeaderProgressFacts | { error: string };
  now: number;
}

export interface MemberHealth {
  role: "voter" | "learner";
  leader: boolean;
  /** this master's own entry is "self"; a peer's session: up, down, or unknown (never reported) */
  link: "self" | "up" | "down" | "unknown";
  /** when the link last changed, ISO 8601 */
  link_since: string | null;
  /** the member's replicated index and how far it trails the commit index: known by the leader only */
  match_index: number | null;
  lag: number | null;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The `cluster.health` report. */
export function clusterHealth(f: HealthFacts): Record<string, unknown> {
  const r = readiness(f);
  const g = f.group;
  const out: Record<string, unknown> = { node_id: f.nodeId, ready: r.ready, ready_reason: r.reason };
  if (!g) return { ...out, leader: null, members: {}, learners: [], state_sync: stateSyncOut(f) };
  const isLeader = g.role === "leader";
  // a follower reports the others' lag as the leader it asked sees it (their match index against its commit)
  const lv = !isLeader && f.leaderView && !("error" in f.leaderView) && f.leaderView.leaderId === g.leaderId ? f.leaderView : undefined;
  const members: Record<string, MemberHealth> = {};
  for (const id of [...g.voters, ...g.learners]) {
    const self = id === f.nodeId;
    const link = f.links?.[id];
    const match = isLeader ? (self ? g.lastIndex : (g.progress?.[id]?.match ?? null)) : lv && !self ? (id === lv.leaderId ? lv.lastIndex : (lv.progress[id]?.match ?? null)) : null;
    const commit = lv && !self ? lv.commit : g.commit;
    members[id] = {
      role: g.voters.includes(id) ? "voter" : "learner",
      leader: id === g.leaderId,
      link: self ? "self" : link ? (link.up ? "up" : "down") : "unknown",
      link_since: !self && link ? iso(link.since) : null,
      match_index: match,
      lag: self ? Math.max(0, g.commit - g.applied) : match === null ? null : Math.max(0, commit - match),
    };
  }
  return {
    ...out,
    role: g.role,
    leader: g.leaderId,
    term: g.term,
    commit_index: g.commit,
    applied_index: g.applied,
    last_index: g.lastIndex,
    lag_known_for: isLeader ? "every member" : lv ? `every member (the others' as the leader ${lv.leaderId} reported them)` : g.leaderId ? `this master only (the leader ${g.leaderId} could not be asked${f.leaderView && "error" in f.leaderView ? `: ${f.leaderView.error}` : ""})` : "this master only (no leader)",
    members,
    learners: [...g.learners],
    state_sync: stateSyncOut(f),
  };
}

function stateSyncOut(f: HealthFacts): unknown {
  if (!f.stateSync) return null;
  return "error" in f.stateSync ? { error: f.stateSync.error } : f.stateSync.status;
}
