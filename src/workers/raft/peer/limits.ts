/**
 * Every bound the peer channel enforces, named with its unit. A transport takes a partial override; anything
 * not given comes from DEFAULT_PEER_LIMITS. The memory one peer can pin is bounded by
 * `peerQueueBytesMax` (our queue, unsealed) + `zmqHighWaterMark` × `frameBytesMax` (frames libzmq holds per
 * connection) + `inboundRequestsMax` running handlers; nothing grows with the traffic rate.
 */
import { BrineError } from "../../../shared/errors.js";

export interface PeerLimits {
  /** one sealed frame on the wire, header and tag included, bytes; larger frames are refused on send and
   *  make libzmq drop the connection on receive (ZMQ_MAXMSGSIZE), before any allocation for them */
  frameBytesMax: number;
  /** one handshake frame (HELLO, WELCOME, AUTH, CONFIRM, REFUSE), bytes: ids, two 32-byte values and an
   *  RSA-4096 signature fit with room to spare */
  handshakeFrameBytesMax: number;
  /** plaintext one DATA frame coalesces from what is already queued (never waiting for more), bytes */
  batchBytesMax: number;
  /** UTF-8 bytes of one channel name */
  channelBytesMax: number;
  /** messages (sends, requests, not yet written to the socket) queued for one peer, count */
  peerQueueMessagesMax: number;
  /** payload bytes queued for one peer, bytes */
  peerQueueBytesMax: number;
  /** requests to one peer awaiting their response, count */
  requestsInFlightMax: number;
  /** requests from one peer whose handler has not answered yet, count; more are answered "busy" at once */
  inboundRequestsMax: number;
  /** replies waiting for the listening socket, per inbound session, count; more are dropped (the requester
   *  times out) */
  replyQueueMessagesMax: number;
  /** time from dialling a peer to an established session, ms; also how long a responder keeps a half-done
   *  handshake */
  handshakeTimeoutMs: number;
  /** handshakes in progress on the listening socket (unauthenticated state), count */
  pendingHandshakesMax: number;
  /** first reconnect delay after a failed attempt, ms */
  reconnectMinMs: number;
  /** reconnect delay ceiling (doubling from reconnectMinMs), ms */
  reconnectMaxMs: number;
  /** ZMTP heartbeat interval on every connection, ms (libzmq sends PINGs; 0 disables) */
  heartbeatIntervalMs: number;
  /** a connection silent for this long is closed by libzmq, which the transport sees as a disconnect, ms */
  heartbeatTimeoutMs: number;
  /** libzmq's per-connection queue (ZMQ_SNDHWM/ZMQ_RCVHWM), frames */
  zmqHighWaterMark: number;
  /** frames one session may seal per direction before the connection is recycled with a new handshake,
   *  count; far below 2^64 nonces, and below 2^53 so counters stay exact JavaScript numbers */
  sessionMessagesMax: number;
  /** refusal warnings logged per window; the rest are counted and summarised, count */
  refusalLogsPerWindow: number;
  /** the window for refusalLogsPerWindow, ms */
  refusalLogWindowMs: number;
  /** granularity of request timeouts, handshake deadlines and reconnect delays (one coarse timer), ms */
  timerTickMs: number;
}

export const DEFAULT_PEER_LIMITS: Readonly<PeerLimits> = Object.freeze({
  // a Raft snapshot is at most 4 MiB (clusterLimits.snapshotBytesMax); twice that leaves room for the message
  frameBytesMax: 8 * 1024 * 1024,
  handshakeFrameBytesMax: 4096,
  // large enough to amortise a seal, a socket write and a wake-up over hundreds of small Raft messages,
  // small enough that one batch is no head-of-line delay on a LAN (64 KiB ≈ 50 µs at 10 Gb/s)
  batchBytesMax: 64 * 1024,
  channelBytesMax: 64,
  peerQueueMessagesMax: 8192,
  peerQueueBytesMax: 64 * 1024 * 1024,
  requestsInFlightMax: 4096,
  inboundRequestsMax: 1024,
  replyQueueMessagesMax: 8192,
  handshakeTimeoutMs: 3000,
  pendingHandshakesMax: 64,
  reconnectMinMs: 100,
  // Salt's minions cap their reconnect backoff at 5 s too (recon_max)
  reconnectMaxMs: 5000,
  heartbeatIntervalMs: 1000,
  heartbeatTimeoutMs: 5000,
  zmqHighWaterMark: 1000,
  sessionMessagesMax: 2 ** 48,
  refusalLogsPerWindow: 20,
  refusalLogWindowMs: 10_000,
  timerTickMs: 10,
});

export function resolvePeerLimits(over: Partial<PeerLimits> = {}): PeerLimits {
  const l = { ...DEFAULT_PEER_LIMITS, ...over };
  for (const [k, v] of Object.entries(l)) {
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new BrineError("CLUSTER_CONFIG", `peer limit ${k} must be a non-negative number`);
  }
  if (l.sessionMessagesMax > Number.MAX_SAFE_INTEGER) throw new BrineError("CLUSTER_CONFIG", "sessionMessagesMax must stay below 2^53");
  if (l.reconnectMaxMs < l.reconnectMinMs) throw new BrineError("CLUSTER_CONFIG", "reconnectMaxMs must be >= reconnectMinMs");
  return l;
}
