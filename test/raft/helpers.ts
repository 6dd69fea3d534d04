/**
 * Helpers for Raft unit tests that drive a bare `Raft` (no Ready loop): build a node over a bootstrapped
 * MemoryStorage, craft messages, read what it sent, and wire several nodes into a lossless in-memory network
 * for multi-node rules.
 */
import type { RaftLimits } from "../../src/workers/raft/core/limits.js";
import { Raft } from "../../src/workers/raft/core/raft.js";
import { Rng } from "../../tools/raft-sim/rng.js";
import { MemoryStorage } from "../../src/workers/raft/core/storage.js";
import type { Entry, Message, MessageType, NodeId } from "../../src/workers/raft/core/types.js";
import { newMessage } from "../../src/workers/raft/core/types.js";

export const ELECTION_TICKS = 10;

export const TEST_LIMITS: Partial<RaftLimits> = {
  electionTicksMin: ELECTION_TICKS,
  heartbeatTicks: 1,
  maxInflightMsgs: 256,
};

export interface RaftOpts {
  learners?: NodeId[];
  storage?: MemoryStorage;
  preVote?: boolean;
  checkQuorum?: boolean;
  limits?: Partial<RaftLimits>;
  seed?: number;
}

/**
 * A node of a group whose founders are `voters` (plus `learners`). The paper's rules are plain Raft, so
 * pre-vote and check-quorum are off unless asked for.
 */
export function newRaft(id: NodeId, voters: NodeId[], opts: RaftOpts = {}): Raft {
  return new Raft({
    id,
    storage: opts.storage ?? MemoryStorage.bootstrap(voters, opts.learners ?? []),
    limits: { ...TEST_LIMITS, ...opts.limits },
    rand: new Rng(opts.seed ?? id).fn(),
    preVote: opts.preVote ?? false,
    checkQuorum: opts.checkQuorum ?? false,
  });
}

/** Storage holding `terms[k]` at index k + 2 (after the genesis entry at index 1, term 1). */
export function storageWithLog(voters: NodeId[], terms: number[], hardTerm = Math.max(1, ...terms)): MemoryStorage {
  const s = MemoryStorage.bootstrap(voters);
  s.append(terms.map((term, k) => entry(k + 2, term)));
  s.setHardState({ term: hardTerm, vote: 0, commit: 1 });
  return s;
}

export function entry(index: number, term: number, data = ""): Entry {
  return { index, term, type: "normal", data: bytes(data) };
}

export function bytes(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}

export function text(b: Uint8Array): string {
  return new TextDecoder().decode(b);
}

export function msg(type: MessageType, from: NodeId, to: NodeId, term: number, fields: Partial<Message> = {}): Message {
  return { ...newMessage(type, from, to, term), ...fields };
}

/** Messages the node produced since the last call, sorted by recipient then kind (stable for assertions). */
export function take(r: Raft): Message[] {
  const out = r.msgs;
  r.msgs = [];
  return out.sort((a, b) => a.to - b.to || a.type.localeCompare(b.type));
}

/** A compact view of messages for deepEqual assertions. */
export function brief(ms: readonly Message[]): string[] {
  return ms.map((m) => {
    const ents = m.entries && m.entries.length > 0 ? ` ents=${m.entries.map((e) => `${e.term}/${e.index}`).join(",")}` : "";
    return `${m.from}->${m.to} ${m.type} t${m.term} i${m.index} lt${m.logTerm} c${m.commit}${m.reject ? " reject" : ""}${ents}`;
  });
}

export function tickN(r: Raft, n: number): void {
  for (let i = 0; i < n; i++) r.tick();
}

/** Elects `r` directly (candidate then leader), the way unit tests set up a leader without messages. */
export function makeLeader(r: Raft): void {
  r.becomeCandidate();
  r.becomeLeader();
  take(r);
}

/** Plays the application's persistence step: unstable entries go to the node's MemoryStorage. */
export function persist(r: Raft): void {
  const ents = r.log.unstable.entries;
  if (ents.length === 0) return;
  (r.log.storage as MemoryStorage).append(ents);
  const last = ents[ents.length - 1]!;
  r.log.unstable.stableTo(last.index, last.term);
}

/** The follower's acceptance of a MsgApp (what a healthy follower would answer). */
export function acceptAndReply(m: Message): Message {
  const last = m.index + (m.entries?.length ?? 0);
  return msg("MsgAppResp", m.to, m.from, m.term, { index: last });
}

/** Terms of the entries in r's log from firstIndex to lastIndex. */
export function logTerms(r: Raft): number[] {
  const out: number[] = [];
  for (let i = r.log.firstIndex(); i <= r.log.lastIndex(); i++) out.push(r.log.term(i));
  return out;
}

/**
 * A lossless, synchronous network of bare Raft nodes (no persistence step: the in-memory log is the log).
 * `send` delivers recursively until no message is left; `cut`/`isolate` drop traffic between nodes.
 */
export class Net {
  readonly peers = new Map<NodeId, Raft>();
  private readonly cuts = new Set<string>();
  delivered: Message[] = [];

  constructor(rafts: Raft[]) {
    for (const r of rafts) this.peers.set(r.id, r);
  }

  static of(ids: NodeId[], opts: RaftOpts = {}): Net {
    return new Net(ids.map((id) => newRaft(id, ids, opts)));
  }

  get(id: NodeId): Raft {
    const r = this.peers.get(id);
    if (!r) throw new Error(`no node ${id}`);
    return r;
  }

  cut(a: NodeId, b: NodeId): void {
    this.cuts.add(`${a}-${b}`);
    this.cuts.add(`${b}-${a}`);
  }

  isolate(id: NodeId): void {
    for (const other of this.peers.keys()) if (other !== id) this.cut(id, other);
  }

  recover(): void {
    this.cuts.clear();
  }

  send(...ms: Message[]): void {
    const queue = [...ms];
    for (let guard = 0; queue.length > 0; guard++) {
      if (guard > 100_000) throw new Error("network does not quiesce");
      const m = queue.shift()!;
      if (this.cuts.has(`${m.from}-${m.to}`)) continue;
      const r = this.peers.get(m.to);
      if (!r) continue;
      this.delivered.push(m);
      r.step(m);
      queue.push(...take(r));
    }
  }

  /** Makes `id` time out and campaign, then delivers everything. */
  campaign(id: NodeId): void {
    this.send(msg("MsgHup", id, id, 0));
  }

  /** Proposes on the leader `id` through the request path and delivers everything. */
  propose(id: NodeId, data: string): void {
    const r = this.get(id);
    r.tracker.add("propose", bytes(data));
    r.flushRequests();
    this.send(...take(r));
  }

  leaders(): Raft[] {
    return [...this.peers.values()].filter((r) => r.role === "leader");
  }
}
