/**
 * The bytes of one Raft payload on the peer channel (channel `raft`): one group's messages for one peer. Two
 * forms, both read by every master of this build:
 *
 *   map form (version 1, every master before session 18):  CBOR {g: group, m: [Message as a map, ...]}
 *   positional form (version 2):                          CBOR [2, group, message, message, ...]
 *       message = [type code, from, to, term, logTerm, index, commit, reject, rejectHint, entries, rest]
 *       entries = null | [term, index, conf (0|1), data, term, index, conf, data, ...]   (flat, four a entry)
 *       rest    = null | {the Message's other fields by name: snapshot, snapOffset, context, requests,
 *                         incarnation, batch, reason, transferee, quiesce}   (only forwarding and snapshots)
 *
 * Why a second form: decoding a map costs cbor-x a keyed store per field on an object shaped anew each time
 * (the leader's appends and a follower's answers were 10-14 µs each to encode and to decode inside the
 * Raft thread, every commit, on the commit's critical path); the positional form is a flat array of numbers,
 * the entries' bytes as byte strings. A master sends it only to a peer whose handshake said it reads it
 * (HELLO/WELCOME `raft: 2`, handshake.ts); to any other peer it sends the map form, so masters of both
 * builds talk during a rolling upgrade.
 *
 * Decoding only reshapes: what comes out is the same raw object as the map form gives, and checkPeerMessage
 * (raft-transport.ts) validates both the same way.
 */
import { cbor } from "../../shared/cbor.js";
import type { Message, MessageType } from "./core/types.js";

/** The payload forms a master of this build reads; the newest is what it tells its peers in the handshake. */
export const RAFT_WIRE_VERSION = 2;
/** messages in one inbound payload, count */
export const raftMessagesPerPayloadMax = 4096;
/** bytes of one group name */
const groupNameBytesMax = 256;

/**
 * The message types peers exchange (local ones like MsgHup never cross the wire), by wire code: the
 * positional form's first field is the index here. Append only, never reordered.
 */
export const PEER_MESSAGE_TYPES: readonly MessageType[] = [
  "MsgProp",
  "MsgPropResp",
  "MsgReadIndex",
  "MsgReadIndexResp",
  "MsgTransferLeader",
  "MsgApp",
  "MsgAppResp",
  "MsgVote",
  "MsgVoteResp",
  "MsgPreVote",
  "MsgPreVoteResp",
  "MsgHeartbeat",
  "MsgHeartbeatResp",
  "MsgSnap",
  "MsgSnapResp",
  "MsgTimeoutNow",
];
const CODE_OF = new Map<string, number>(PEER_MESSAGE_TYPES.map((t, i) => [t, i]));

/** The Message fields carried in `rest` when present (every field the positional part does not hold). */
const REST_FIELDS = ["snapshot", "snapOffset", "context", "requests", "incarnation", "batch", "reason", "transferee", "quiesce"] as const;

/** Encodes one group's messages for one peer, in the newest form that peer reads (`peerVersion`: its handshake's word, 1 if none). */
export function encodeRaftPayload(group: string, messages: readonly Message[], peerVersion = 1): Uint8Array {
  if (peerVersion < 2) return cbor.encode({ g: group, m: messages }) as Uint8Array;
  const out: unknown[] = [2, group];
  for (const m of messages) out.push(positional(m));
  return cbor.encode(out) as Uint8Array;
}

function positional(m: Message): unknown[] {
  const code = CODE_OF.get(m.type);
  if (code === undefined) throw new Error(`${m.type} does not cross the wire`);
  let entries: unknown[] | null = null;
  if (m.entries && m.entries.length > 0) {
    entries = [];
    for (const e of m.entries) entries.push(e.term, e.index, e.type === "conf" ? 1 : 0, e.data);
  }
  let rest: Record<string, unknown> | null = null;
  for (const k of REST_FIELDS) {
    if (m[k] === undefined) continue;
    (rest ??= {})[k] = m[k];
  }
  return [code, m.from, m.to, m.term, m.logTerm, m.index, m.commit, m.reject, m.rejectHint, entries, rest];
}

/**
 * Decodes a payload of either form into a group and raw (unvalidated) messages, each shaped as the map form's:
 * checkPeerMessage decides what is acceptable. Throws on bytes that are neither form.
 */
export function decodeRaftPayload(bytes: Uint8Array): { group: string; messages: unknown[] } {
  const v = cbor.decode(bytes) as unknown;
  if (Array.isArray(v)) return fromPositional(v);
  const x = v as { g?: unknown; m?: unknown } | null;
  if (x === null || typeof x !== "object" || typeof x.g !== "string" || Buffer.byteLength(x.g) > groupNameBytesMax || !Array.isArray(x.m)) {
    throw new Error("not a raft payload");
  }
  if (x.m.length > raftMessagesPerPayloadMax) throw new Error(`${x.m.length} messages in one payload`);
  return { group: x.g, messages: x.m };
}

function fromPositional(v: unknown[]): { group: string; messages: unknown[] } {
  if (v[0] !== 2) throw new Error(`raft payload of version ${String(v[0]).slice(0, 16)}`);
  const group = v[1];
  if (typeof group !== "string" || Buffer.byteLength(group) > groupNameBytesMax) throw new Error("not a raft payload");
  if (v.length - 2 > raftMessagesPerPayloadMax) throw new Error(`${v.length - 2} messages in one payload`);
  const messages: unknown[] = [];
  for (let i = 2; i < v.length; i++) messages.push(fromTuple(v[i]));
  return { group, messages };
}

/** One positional message as the map form's raw object (fields unchecked; a malformed one stays malformed). */
function fromTuple(t: unknown): unknown {
  if (!Array.isArray(t) || t.length !== 11) return null; // refused by checkPeerMessage: "not a map"
  const raw: Record<string, unknown> = {
    // refused by checkPeerMessage unless a known code: a type given by name is not one
    type: (typeof t[0] === "number" && PEER_MESSAGE_TYPES[t[0]]) || `code ${String(t[0]).slice(0, 16)}`,
    from: t[1],
    to: t[2],
    term: t[3],
    logTerm: t[4],
    index: t[5],
    commit: t[6],
    reject: t[7],
    rejectHint: t[8],
  };
  const es = t[9];
  if (es !== null && es !== undefined) {
    if (!Array.isArray(es) || es.length % 4 !== 0) {
      raw.entries = "malformed";
    } else {
      const entries: unknown[] = [];
      for (let i = 0; i < es.length; i += 4) {
        const kind = es[i + 2];
        entries.push({ term: es[i], index: es[i + 1], type: kind === 0 ? "normal" : kind === 1 ? "conf" : kind, data: es[i + 3] });
      }
      raw.entries = entries;
    }
  }
  const rest = t[10];
  if (rest !== null && rest !== undefined) {
    if (typeof rest !== "object" || Array.isArray(rest)) raw.type = "a message with a malformed rest";
    else for (const k of REST_FIELDS) if (Object.hasOwn(rest, k)) raw[k] = (rest as Record<string, unknown>)[k];
  }
  return raw;
}
