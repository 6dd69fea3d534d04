/**
 * The peer channel's public types: endpoints and options, what channel handlers get, events, status and
 * counters, and the error a failed remote handler becomes. PeerTransport (peer-transport.ts) is the API;
 * it re-exports these.
 */
import type { StageSink } from "../../../shared/metrics/stage-clock.js";
import type * as zmq from "zeromq";
import { BrineError } from "../../../shared/errors.js";
import type { Logger } from "../../../shared/log.js";
import type { RefuseReason } from "./handshake.js";
import type { PeerIdentity, PeerKeyring } from "../../../shared/cluster-keys.js";
import type { PeerLimits } from "./limits.js";

export interface PeerEndpoint {
  host: string;
  port: number;
  /** the node id expected at this address; omitted: learned (and proven) in the first handshake */
  id?: string;
}

export interface PeerTransportOptions {
  clusterId: string;
  /** this master's node id; must be `keys.self.id` */
  selfId: string;
  listen: { host: string; port: number };
  peers: PeerEndpoint[];
  keys: { self: PeerIdentity; keyring: PeerKeyring };
  limits?: Partial<PeerLimits>;
  log?: Logger;
  context?: zmq.Context;
  /** where the channel's stages add their time (the Raft worker's StageClock) */
  stages?: StageSink;
  /** the newer payload forms this master reads, by channel (`{raft: 2}`), told to every peer in the handshake */
  channelVersions?: Readonly<Record<string, number>>;
}

/** What a channel handler gets. */
export interface PeerMessage {
  /** the authenticated node id of the sender */
  from: string;
  channel: string;
  payload: Uint8Array;
  /** true for request(): the handler's return value (or throw) is the reply */
  request: boolean;
}

/**
 * A channel handler. For a request, its return value is the response payload (undefined: an empty one) and
 * a throw becomes an error response; for a one-way message the return value is ignored.
 */
export type PeerHandler = (msg: PeerMessage) => Uint8Array | void | Promise<Uint8Array | void>;

export interface RefusedInfo {
  /** inbound: a peer dialled us; outbound: we dialled `address`; remote: the peer refused us */
  direction: "inbound" | "outbound" | "remote";
  address?: string;
  claimedId?: string;
  reason: RefuseReason | string;
  detail: string;
}

export interface PeerTransportEvents {
  /** an outbound session to `peerId` is established: sends are written from now on */
  peerUp: [peerId: string, info: { address: string; sessionId: string }];
  /** the outbound session to `peerId` ended; queued messages wait for the next one */
  peerDown: [peerId: string, reason: string];
  refused: [info: RefusedInfo];
}

/** A request failed on the other side: `remoteCode` is the code the peer's handler threw (or its reason). */
export class PeerRemoteError extends BrineError {
  constructor(
    readonly peerId: string,
    readonly remoteCode: string,
    remoteText: string,
  ) {
    super("CLUSTER_PEER_REMOTE", `${peerId} answered ${remoteCode}: ${remoteText}`);
  }
}

export interface PeerStatus {
  id: string | undefined;
  address: string;
  state: LinkState;
  sessionId: string | undefined;
  queuedMessages: number;
  queuedBytes: number;
  requestsInFlight: number;
  /** connection attempts that failed since the transport started */
  failedAttempts: number;
}

export interface PeerCounters {
  refused: number;
  replays: number;
  authFailures: number;
  badFrames: number;
  /** frames from a connection with no session (never authenticated, or replaced) */
  unauthenticatedFrames: number;
  repliesDropped: number;
  messagesWithoutHandler: number;
  /** DATA frames written and the bodies they carried (bodies / frames = the batching factor) */
  framesOut: number;
  bodiesOut: number;
}

export type LinkState = "idle" | "connecting" | "up" | "closed";

export interface SendOptions {
  /** write at once rather than after the current I/O burst (PeerTransport.send) */
  now?: boolean;
  /**
   * queue only: the caller writes it with PeerTransport.flush before it yields (the Raft link, which flushes
   * after every batch of sends), so no write after the I/O burst is scheduled for it
   */
  held?: boolean;
}
