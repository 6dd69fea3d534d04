/**
 * Messages between the main thread and the publisher thread, in the style of src/shared/port-calls.ts (told apart
 * by `k`): a stream each way, in order (loads in, sealed frames out), no calls.
 */
export interface PublisherInit {
  secrets: SharedArrayBuffer;
  pkiDir: string;
  /** the signing key's file name without `.pem`: "master", or "cluster" under clustering */
  keyName?: string;
  signPubMessages: boolean;
  signingAlgorithm: string;
  /** under clustering publishes carry no serial (3007) */
  clustered: boolean;
  /** the master's logging (a publish this thread cannot seal is logged) */
  log?: { level: string; file: string | null; fileLevel: string | null };
}

/** main → publisher: loads to seal and sign, in the order they must reach the PUB socket */
export interface PublisherRequest {
  k: "pub";
  loads: Record<string, unknown>[];
}

/** publisher → main: the frames of one PublisherRequest, in its order */
export interface PublisherReply {
  k: "frames";
  frames: Uint8Array[];
}
