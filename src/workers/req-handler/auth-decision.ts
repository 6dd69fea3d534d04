/**
 * The `_auth` decision table (salt-protocol §3.2), as a pure function: the caller gathers the facts
 * (key files, autosign checks, connection count) and performs the file effects this returns.
 * Order matters and follows Salt's: id validity, max_minions, open_mode, rejected, accepted,
 * pending-directory, autoreject, pending, autosign.
 */

export type AuthFileOp =
  | { op: "write"; state: "accepted" | "pending" | "rejected" | "denied" }
  | { op: "move"; from: "pending"; to: "rejected" | "accepted" }
  | { op: "delete"; state: "pending" };

export interface AuthFacts {
  idValid: boolean;
  /** cleaned public key from the request ("" when absent) */
  pub: string;
  openMode: boolean;
  /** max_minions > 0, more connected than allowed, and this id not among them */
  full: boolean;
  rejectedExists: boolean;
  /** cleaned accepted key, if minions/<id> exists */
  accepted?: string;
  /** cleaned pending key, if minions_pre/<id> is a file */
  pending?: string;
  pendingIsDir: boolean;
  autoreject: boolean;
  autosign: boolean;
}

export type AuthOutcome =
  | { kind: "invalid" } // ret False, no event
  | { kind: "full" } // ret "full", act full
  | { kind: "accept"; ops: AuthFileOp[] } // signed accept reply; event accept at the end
  | { kind: "refuse"; ret: boolean; ops: AuthFileOp[]; event: { result: boolean; act: string } | null };

export function decideAuth(f: AuthFacts): AuthOutcome {
  if (!f.idValid) return { kind: "invalid" };
  if (f.full) return { kind: "full" };
  if (f.openMode) {
    if (!f.pub) return { kind: "refuse", ret: false, ops: [], event: { result: false, act: "reject" } };
    return { kind: "accept", ops: f.accepted === f.pub ? [] : [{ op: "write", state: "accepted" }] };
  }
  if (f.rejectedExists) return { kind: "refuse", ret: false, ops: [], event: { result: false, act: "reject" } };
  if (f.accepted !== undefined) {
    if (f.accepted !== f.pub) {
      return { kind: "refuse", ret: false, ops: [{ op: "write", state: "denied" }], event: { result: false, act: "denied" } };
    }
    return { kind: "accept", ops: [] };
  }
  if (f.pending === undefined) {
    if (f.pendingIsDir) return { kind: "refuse", ret: false, ops: [], event: { result: false, act: "reject" } };
    if (f.autoreject) {
      return { kind: "refuse", ret: false, ops: [{ op: "write", state: "rejected" }], event: { result: false, act: "reject" } };
    }
    if (!f.autosign) {
      return { kind: "refuse", ret: true, ops: [{ op: "write", state: "pending" }], event: { result: true, act: "pend" } };
    }
    return { kind: "accept", ops: [{ op: "write", state: "accepted" }] };
  }
  // a pending key exists
  if (f.autoreject) {
    return { kind: "refuse", ret: false, ops: [{ op: "move", from: "pending", to: "rejected" }], event: { result: false, act: "reject" } };
  }
  if (f.pending !== f.pub) {
    return { kind: "refuse", ret: false, ops: [{ op: "write", state: "denied" }], event: { result: false, act: "denied" } };
  }
  if (!f.autosign) return { kind: "refuse", ret: true, ops: [], event: { result: true, act: "pend" } };
  return { kind: "accept", ops: [{ op: "delete", state: "pending" }, { op: "write", state: "accepted" }] };
}
