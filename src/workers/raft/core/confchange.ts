/**
 * Membership changes: their byte encoding inside a "conf" entry, and how one change turns a ConfState into
 * the next. The core applies a conf entry when it hands it to the application as committed (never at append,
 * which is what made Salt's single-server changes unsafe across leader changes).
 */
import { BrineError } from "../../../shared/errors.js";
import type { ConfChange, ConfChangeKind, ConfState, NodeId } from "./types.js";

const CONF_CHANGE_VERSION = 1;
const KIND_CODES: Record<ConfChangeKind, number> = { addVoter: 1, addLearner: 2, removeNode: 3 };
const KINDS_BY_CODE: ConfChangeKind[] = ["addVoter", "addVoter", "addLearner", "removeNode"];
/** version, kind, id high 32 bits, id low 32 bits */
const HEADER_BYTES = 10;
const TWO_TO_32 = 0x1_0000_0000;

export function encodeConfChange(cc: ConfChange): Uint8Array {
  assertNodeId(cc.node);
  const ctx = cc.context ?? new Uint8Array(0);
  const out = new Uint8Array(HEADER_BYTES + ctx.length);
  const dv = new DataView(out.buffer);
  dv.setUint8(0, CONF_CHANGE_VERSION);
  dv.setUint8(1, KIND_CODES[cc.kind]);
  dv.setUint32(2, Math.floor(cc.node / TWO_TO_32));
  dv.setUint32(6, cc.node % TWO_TO_32);
  out.set(ctx, HEADER_BYTES);
  return out;
}

export function decodeConfChange(data: Uint8Array): ConfChange {
  if (data.length < HEADER_BYTES || data[0] !== CONF_CHANGE_VERSION) {
    throw new BrineError("RAFT_REJECTED", "malformed conf change entry");
  }
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const code = dv.getUint8(1);
  if (code < 1 || code > 3) throw new BrineError("RAFT_REJECTED", `unknown conf change kind ${code}`);
  const node = dv.getUint32(2) * TWO_TO_32 + dv.getUint32(6);
  assertNodeId(node);
  const cc: ConfChange = { kind: KINDS_BY_CODE[code]!, node };
  if (data.length > HEADER_BYTES) cc.context = data.slice(HEADER_BYTES);
  return cc;
}

export function assertNodeId(id: NodeId): void {
  if (!Number.isSafeInteger(id) || id < 1) throw new BrineError("RAFT_REJECTED", `invalid node id ${id}`);
}

/**
 * Why `cc` may not be proposed by leader `leader` under `cs`, or undefined when it may. Checked when the
 * leader appends the change, so a refused change never enters the log.
 */
export function confChangeRefusal(cs: ConfState, cc: ConfChange, leader: NodeId): string | undefined {
  const isVoter = cs.voters.includes(cc.node);
  const isLearner = cs.learners.includes(cc.node);
  switch (cc.kind) {
    case "addVoter":
      return isVoter ? `node ${cc.node} is already a voter` : undefined;
    case "addLearner":
      if (isLearner) return `node ${cc.node} is already a learner`;
      if (cc.node === leader) return "the leader cannot demote itself; transfer leadership first";
      return undefined;
    case "removeNode":
      if (!isVoter && !isLearner) return `node ${cc.node} is not a member`;
      if (cc.node === leader) return "the leader cannot remove itself; transfer leadership first";
      if (isVoter && cs.voters.length === 1) return "cannot remove the last voter";
      return undefined;
  }
}

/** The membership after applying `cc` (committed at `index`). Pure; sorted ids for stable output. */
export function applyConfChange(cs: ConfState, cc: ConfChange, index: number): ConfState {
  const voters = cs.voters.filter((id) => id !== cc.node);
  const learners = cs.learners.filter((id) => id !== cc.node);
  if (cc.kind === "addVoter") voters.push(cc.node);
  if (cc.kind === "addLearner") learners.push(cc.node);
  voters.sort((a, b) => a - b);
  learners.sort((a, b) => a - b);
  return { voters, learners, confIndex: index };
}

export function cloneConfState(cs: ConfState): ConfState {
  return { voters: [...cs.voters], learners: [...cs.learners], confIndex: cs.confIndex };
}
