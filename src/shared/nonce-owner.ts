/**
 * Who decides whether a request nonce was seen, in a cluster (issue #13): the pure core of the nonce owner check.
 *
 * Forwarding a master's accepted nonces to its peers (forwarding.ts) takes milliseconds, so a captured frame
 * sent to two masters at once would be accepted by both. Instead, every minion id has one decider among the
 * cluster's members: the first master in the id's order on the `cluster` ring (its owner, then rendezvous
 * order: RingReader.replicas, the same table on every master) that is this master or that this master sees
 * up. A master that is not its minion's decider asks the decider to check-and-insert the nonces of a batch
 * before it acts on their frames; the decider's set (the same SharedArrayBuffer its own request workers insert
 * into by CAS) answers each nonce exactly once "fresh". When the decider does not answer within the bound,
 * the frame is accepted as before this check (availability over exactly-once: counted and logged).
 *
 * Wire, on peer channel `cl/nonce` (a request): the packed nonces (nonce-set.ts packNonces: 8 bytes each),
 * answered by one verdict byte per nonce. No clock, no I/O here: the shells are
 * src/workers/req-handler/nonce-owner-client.ts (the asking worker) and src/main-thread/cluster/nonce-owner.ts.
 */
import { NONCE_PACKED_BYTES } from "./nonce-set.js";

/** The decider had the nonce already: a replay, refused. */
export const NONCE_SEEN = 0;
/** The decider had not seen it and has recorded it: this master may act on the frame. */
export const NONCE_FRESH = 1;
/** No decider answered in time (down, cut off, slow, failed): accepted as before the check, and counted. */
export const NONCE_UNDECIDED = 2;
export type NonceVerdict = typeof NONCE_SEEN | typeof NONCE_FRESH | typeof NONCE_UNDECIDED;

/** Nonces one `cl/nonce` request carries at most, count (a worker batch holds at most 64 frames). */
export const ownerAskNoncesMax = 4096;

/** Why a worker's ask is refused (undefined: its owners, items and nonces agree, within the bounds). */
export function badWorkerAsk(m: { owners?: unknown; which?: unknown; ids?: unknown; n?: unknown }): string | undefined {
  const { owners, which, ids, n } = m;
  if (!Array.isArray(owners) || owners.length === 0 || owners.length > 255 || !owners.every((o) => typeof o === "string")) return "bad owners";
  if (!(which instanceof Uint8Array) || which.length === 0 || which.length > ownerAskNoncesMax) return "bad items";
  if (!Array.isArray(ids) || ids.length !== which.length) return "ids do not match the items";
  if (!(n instanceof Uint8Array) || n.byteLength !== which.length * NONCE_PACKED_BYTES) return "nonces do not match the items";
  for (const o of which) if (o >= owners.length) return "an item names no owner";
  return undefined;
}

/**
 * The master that decides for a minion whose ring order is `order` (its owner first): the first that is this
 * master or is up as this master sees it; this master when none is (it decides alone, as an unclustered one).
 */
export function deciderOf(order: readonly string[], self: string, isUp: (id: string) => boolean): string {
  for (const m of order) if (m === self || isUp(m)) return m;
  return self;
}

/**
 * Requests whose second copy only reads: the fileserver's requests, the master's options, mine.get and a peer
 * job's returns (pub_ret), each answered encrypted to the minion, storing and firing nothing. The decider is not
 * asked for them: a copy acted on twice costs only the work, and a state run's many file requests would each
 * wait a peer round trip. This master's own nonce set still refuses a copy sent to it. Everything else is asked
 * about, `_pillar` and `_master_tops` included (an ext_pillar or ext_nodes command may act, and the pillar fires
 * `minion/refresh`), and so is a command not named here (the safe default for a handler added later).
 */
const replayHarmlessCommands: ReadonlySet<string> = new Set([
  "_master_opts",
  "_mine_get",
  "pub_ret",
  "_serve_file",
  "_file_hash",
  "_file_hash_and_stat",
  "_file_find",
  "_file_list",
  "_file_list_emptydirs",
  "_dir_list",
  "_symlink_list",
  "_file_envs",
]);

/** Whether a request with this `cmd` needs its decider's word at all (see replayHarmlessCommands). */
export function commandNeedsDecider(cmd: unknown): boolean {
  return !(typeof cmd === "string" && replayHarmlessCommands.has(cmd));
}

/** Whether a request of a minion with this ring owner needs asking anyone: not when this master owns it, or no ring is published. */
export function needsAsk(owner: string | null, self: string): boolean {
  return owner !== null && owner !== self;
}

/**
 * A batch's asks grouped by decider. Item i's minion is owned by `owners[which[i]]`; when that owner is neither
 * this master nor up, `orderOf(i)` gives the minion's whole ring order (read only then: it costs a ring read).
 * `local`: the items this master decides itself (its own set's insert, already done by the worker, was the
 * decision: fresh); `remote`: per peer, the indices of the items to ask it.
 */
export function planAsks(owners: readonly string[], which: Uint8Array, self: string, isUp: (id: string) => boolean, orderOf: (item: number) => readonly string[]): { local: number[]; remote: Map<string, number[]> } {
  const local: number[] = [];
  const remote = new Map<string, number[]>();
  which.forEach((o, i) => {
    const owner = owners[o]!;
    const d = owner === self || isUp(owner) ? owner : deciderOf(orderOf(i), self, isUp);
    if (d === self) local.push(i);
    else {
      let list = remote.get(d);
      if (!list) remote.set(d, (list = []));
      list.push(i);
    }
  });
  return { local, remote };
}

/** Why a `cl/nonce` request's body is refused (undefined: it is whole packed nonces, within the bound). */
export function badAsk(body: Uint8Array): string | undefined {
  if (body.byteLength === 0) return "no nonce";
  if (body.byteLength % NONCE_PACKED_BYTES !== 0) return `${body.byteLength} bytes is not a whole number of packed nonces`;
  if (body.byteLength / NONCE_PACKED_BYTES > ownerAskNoncesMax) return `${body.byteLength / NONCE_PACKED_BYTES} nonces, more than ${ownerAskNoncesMax}`;
  return undefined;
}

/**
 * The decider's side: one verdict per packed nonce, by `insert` (the nonce set's check-and-insert on the two
 * words: true when it was new). A word of 0 is never packed: such a nonce gets NONCE_SEEN (refused, not
 * recorded). Call only on a body badAsk accepts.
 */
export function decideAsk(body: Uint8Array, insert: (hi: number, lo: number) => boolean): Uint8Array {
  const count = body.byteLength / NONCE_PACKED_BYTES;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const out = new Uint8Array(count);
  for (let i = 0; i < count; i++) {
    const hi = view.getInt32(i * 8, true);
    const lo = view.getInt32(i * 8 + 4, true);
    out[i] = hi !== 0 && lo !== 0 && insert(hi, lo) ? NONCE_FRESH : NONCE_SEEN;
  }
  return out;
}

/**
 * The asking side: a decider's answer to the items `indices` put into `verdicts`. An answer that is not one
 * verdict byte (0 or 1) per nonce asked leaves those items undecided and says why.
 */
export function takeAnswer(verdicts: Uint8Array, indices: readonly number[], answer: Uint8Array): string | undefined {
  if (answer.byteLength !== indices.length) return `${answer.byteLength} verdicts for ${indices.length} nonces`;
  for (let i = 0; i < answer.length; i++) if (answer[i] !== NONCE_SEEN && answer[i] !== NONCE_FRESH) return `verdict ${answer[i]} is neither seen nor fresh`;
  indices.forEach((at, i) => (verdicts[at] = answer[i]!));
  return undefined;
}

/** What a frame does with its verdict: act on it, refuse it as a replay, or act on it without a decision (counted). */
export function frameAction(v: number): "dispatch" | "refuse" | "fallback" {
  return v === NONCE_FRESH ? "dispatch" : v === NONCE_SEEN ? "refuse" : "fallback";
}

/**
 * The BroadcastChannel a master's request workers ask its main thread on (one per master: several masters may
 * run in one process in tests). Messages in the one port style (src/shared/port-calls.ts): worker → main
 * `{k: "ask", from, id, owners, which, ids, n}` (the distinct ring owners of the items' minions, per item the
 * index of its owner, its minion id, and the items' packed nonces in the same order),
 * answered `{k: "res", to, id, v}` (one verdict byte per item) or `{k: "err", to, id, code, text}`.
 */
export function nonceOwnerChannelName(sockDir: string, retPort: number | string): string {
  return `brine-nonce-owner:${sockDir}:${retPort}`;
}

export type NonceOwnerMsg =
  | { k: "ask"; from: string; id: number; owners: string[]; which: Uint8Array; ids: string[]; n: Uint8Array }
  | { k: "res"; to: string; id: number; v: Uint8Array }
  | { k: "err"; to: string; id: number; code: string; text: string }
  /** a request worker accepted `n` requests undecided on its own (its deadline passed, its ask failed, the ring unreadable): counted by the main thread */
  | { k: "undecided"; n: number };
