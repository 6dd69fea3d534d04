/**
 * One-line text forms of Raft values, for logs, golden test files and simulator traces. Stable on purpose:
 * golden files compare these strings.
 */
import { decodeConfChange } from "./confchange.js";
import type { Status } from "./raw-node.js";
import type { ConfState, Entry, HardState, Message, Ready, RequestResult, Snapshot } from "./types.js";

const PRINTABLE = /^[\x20-\x7e]*$/;
const dataPreviewBytesMax = 32;

export function describeData(data: Uint8Array): string {
  const text = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("latin1");
  if (PRINTABLE.test(text)) {
    return data.length <= dataPreviewBytesMax ? JSON.stringify(text) : `${JSON.stringify(text.slice(0, dataPreviewBytesMax))}…(${data.length}B)`;
  }
  const hex = Buffer.from(data.buffer, data.byteOffset, Math.min(data.byteLength, dataPreviewBytesMax / 2)).toString("hex");
  return `0x${hex}${data.length > dataPreviewBytesMax / 2 ? "…" : ""}(${data.length}B)`;
}

export function describeEntry(e: Entry): string {
  const pos = `${e.term}/${e.index}`;
  if (e.type === "conf") {
    try {
      const cc = decodeConfChange(e.data);
      return `${pos} conf:${cc.kind}(${cc.node})`;
    } catch {
      return `${pos} conf:<malformed>`;
    }
  }
  return e.data.length === 0 ? `${pos} (empty)` : `${pos} ${describeData(e.data)}`;
}

export function describeEntries(es: readonly Entry[]): string {
  return `[${es.map(describeEntry).join(", ")}]`;
}

export function describeHardState(hs: HardState): string {
  return `HardState term=${hs.term} vote=${hs.vote} commit=${hs.commit}`;
}

export function describeConfState(cs: ConfState): string {
  return `voters=(${cs.voters.join(" ")}) learners=(${cs.learners.join(" ")}) confIndex=${cs.confIndex}`;
}

export function describeSnapshot(s: Snapshot): string {
  const md = s.metadata;
  return `Snapshot index=${md.index} term=${md.term} ${describeConfState(md.confState)} bytes=${s.data.length}`;
}

/** Fields shown per message kind: only those the kind uses, so golden files stay readable. */
export function describeMessage(m: Message): string {
  const parts = [`${m.from}->${m.to} ${m.type}`];
  if (m.term !== 0) parts.push(`term=${m.term}`);
  switch (m.type) {
    case "MsgApp":
      parts.push(`prev=${m.logTerm}/${m.index}`, `commit=${m.commit}`);
      if (m.entries && m.entries.length > 0) parts.push(`entries=${describeEntries(m.entries)}`);
      break;
    case "MsgAppResp":
      parts.push(`index=${m.index}`);
      if (m.reject) parts.push(`rejected hint=${m.logTerm}/${m.rejectHint}`);
      break;
    case "MsgVote":
    case "MsgPreVote":
      parts.push(`last=${m.logTerm}/${m.index}`);
      if (m.context) parts.push(`(${m.context})`);
      break;
    case "MsgVoteResp":
    case "MsgPreVoteResp":
      parts.push(m.reject ? "rejected" : "granted");
      break;
    case "MsgHeartbeat":
      parts.push(`commit=${m.commit}`);
      if (m.context) parts.push(`ctx=${m.context}`);
      if (m.quiesce) parts.push(`quiesce last=${m.logTerm}/${m.index}`);
      break;
    case "MsgHeartbeatResp":
      if (m.context) parts.push(`ctx=${m.context}`);
      if (m.reject) parts.push("declines rest");
      break;
    case "MsgSnap": {
      const c = m.snapshot!;
      parts.push(`snap=${c.metadata.term}/${c.metadata.index} bytes=[${c.offset},${c.offset + c.data.length})/${c.totalBytes}`);
      break;
    }
    case "MsgSnapResp":
      parts.push(`snap=${m.index} want=${m.snapOffset ?? 0}`);
      break;
    case "MsgProp":
      parts.push(`reqs=${(m.requests ?? []).join(",")} entries=${describeEntries(m.entries ?? [])}`);
      break;
    case "MsgPropResp":
      parts.push(`reqs=${(m.requests ?? []).join(",")}`);
      parts.push(m.reject ? `rejected ${m.reason} (${m.context ?? ""})` : `at=${m.logTerm}/${m.index}`);
      break;
    case "MsgReadIndex":
      parts.push(`reqs=${(m.requests ?? []).join(",")}`);
      break;
    case "MsgReadIndexResp":
      parts.push(`reqs=${(m.requests ?? []).join(",")}`);
      parts.push(m.reject ? `rejected ${m.reason}` : `index=${m.index}`);
      break;
    case "MsgTransferLeader":
      parts.push(`to=${m.transferee ?? 0}`);
      break;
    default:
      break;
  }
  return parts.join(" ");
}

export function describeResult(r: RequestResult): string {
  if (!r.ok) return `request ${r.id} ${r.kind} failed ${r.code}: ${r.detail}`;
  if (r.kind === "read") return `request ${r.id} read ok index=${r.index}`;
  if (r.kind === "conf") return `request ${r.id} conf ok at ${r.term}/${r.index} ${describeEntry({ term: r.term, index: r.index, type: "conf", data: r.value }).split(" ")[1]}`;
  return `request ${r.id} ${r.kind} ok at ${r.term}/${r.index} value=${describeData(r.value)}`;
}

/** Every part of a Ready, one line each, in the order the shell handles them. */
export function describeReady(rd: Ready): string[] {
  const out: string[] = [];
  if (rd.softState) out.push(`Lead:${rd.softState.lead} Role:${rd.softState.role}`);
  if (rd.hardState) out.push(describeHardState(rd.hardState));
  if (rd.snapshot) out.push(describeSnapshot(rd.snapshot));
  if (rd.entries.length > 0) out.push(`Entries: ${describeEntries(rd.entries)}`);
  if (rd.confState) out.push(`ConfState: ${describeConfState(rd.confState)}`);
  if (rd.committedEntries.length > 0) out.push(`CommittedEntries: ${describeEntries(rd.committedEntries)}`);
  if (rd.messages.length > 0) {
    out.push("Messages:");
    for (const m of rd.messages) out.push(`  ${describeMessage(m)}`);
  }
  for (const r of rd.results) out.push(`Result: ${describeResult(r)}`);
  return out;
}

export function describeStatus(st: Status): string {
  const base =
    `${st.id} ${st.role} term=${st.term} lead=${st.lead} vote=${st.vote} commit=${st.commit} applied=${st.applied} ` +
    `log=[${st.firstIndex},${st.lastIndex}] ${describeConfState(st.confState)}${st.quiesced ? " resting" : ""}`;
  if (!st.progress) return base;
  const prs = [...st.progress.entries()]
    .sort(([a], [b]) => a - b)
    .map(([id, p]) => `${id}:${p.state}${p.isLearner ? "(learner)" : ""} match=${p.match} next=${p.next}`);
  return `${base}\n  progress: ${prs.join("; ")}`;
}
