/**
 * Peer requests of a kind a master does not know: a cluster of masters of different versions (a rolling upgrade)
 * asks an older master for a request its channel's handler has no case for. The handler answers at once with
 * PEER_UNKNOWN_KIND (unknownKind), never a silence the asker would wait out; the asker tells that answer apart
 * from a failure worth retrying (lacksKind) and goes on without that master, saying so. A master of a version
 * before this code answered the same question with its channel's malformed-message error, `unknown op <kind>`
 * (raft/placement, raft/minions since they exist): that answer counts too. A channel with no handler at all
 * (CLUSTER_PEER_CHANNEL) does not: a master starting registers its handlers just after its peer channel, so
 * that answer may be a moment's, and is retried.
 */
import { BrineError } from "../../shared/errors.js";
import { PeerRemoteError } from "./peer/peer-types.js";

/** The answer of `self`'s handler of `channel` to a request kind it does not know. */
export function unknownKind(channel: string, kind: unknown, self: string): BrineError {
  return new BrineError("PEER_UNKNOWN_KIND", `${self} has no ${channel} request ${JSON.stringify(kind)}`);
}

/** The codes under which a master older than PEER_UNKNOWN_KIND answered a kind it did not know (`unknown op <kind>`). */
const OLDER_CODES = new Set(["PLACEMENT_BAD_MESSAGE", "MINION_PLACEMENT_BAD_MESSAGE"]);

/** Whether `e` is a peer's answer that it does not know request `kind` (it runs another version). */
export function lacksKind(e: unknown, kind: string): boolean {
  if (!(e instanceof PeerRemoteError)) return false;
  if (e.remoteCode === "PEER_UNKNOWN_KIND") return e.message.endsWith(`request ${JSON.stringify(kind)}`);
  return OLDER_CODES.has(e.remoteCode) && e.message.endsWith(`unknown op ${kind}`);
}
