/**
 * Messages between the main thread and the publisher thread, in the style of src/shared/port-calls.ts (told apart
 * by `k`): a stream each way, in order (publishes in, frames out, one reply per request), no calls.
 */
export interface PublisherInit {
  secrets: SharedArrayBuffer;
  pkiDir: string;
  /** the signing key's file name without `.pem`: "master", or "cluster" under clustering */
  keyName?: string;
  signPubMessages: boolean;
  signingAlgorithm: string;
  /** under clustering publishes carry no serial (3007), and the frames of this master's own publishes go to the peers */
  clustered: boolean;
  /** the master's logging (a publish this thread cannot seal is logged) */
  log?: { level: string; file: string | null; fileLevel: string | null };
}

/** main → publisher: this master's own publish loads to seal and sign, in the order they must reach the PUB socket */
export interface PublisherRequest {
  k: "pub";
  loads: Record<string, unknown>[];
}

/**
 * main → publisher: publishes a peer forwarded (cl/pub). `loads` is the msgpack of the array of loads, as the
 * peer sent it; `frames` (absent from a brine that forwards loads only) the frames the peer sealed, one per load
 * in the same order: each is sent as it came when this master's minions accept it (sealed-frame.ts), and its load
 * sealed here otherwise. Never forwarded again.
 */
export interface PublisherForwarded {
  k: "fwd";
  /** the peer's node id (for log lines) */
  from: string;
  loads: Uint8Array;
  frames?: Uint8Array[];
}

export type PublisherMessage = PublisherRequest | PublisherForwarded;

/** What the publisher thread did since it started (each reply carries the totals so far). */
export interface PublisherCounts {
  /** loads encrypted here (this master's own, and a peer's whose frame could not be sent as it came) */
  sealed: number;
  /** RSA signatures made (`sign_pub_messages`) */
  signed: number;
  /** peers' sealed frames sent as they came, without crypto of this thread's own */
  passed: number;
  /** peers' sealed frames not sent as they came (logged; their loads sealed here instead) */
  refused: number;
  /** loads dropped: not sealable, or a peer's batch whose loads do not decode */
  dropped: number;
}

/** publisher → main: the frames of one request, in its order */
export interface PublisherReply {
  k: "frames";
  frames: Uint8Array[];
  /**
   * Clustered, for a "pub" request: the msgpack of the array of the loads sealed, one per frame in `frames`'
   * order, which the main thread sends to the peers with the frames (forwarding.ts).
   */
  forward?: Uint8Array;
  counts: PublisherCounts;
}
