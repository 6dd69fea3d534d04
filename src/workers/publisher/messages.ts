/** Messages between the main thread and the publisher thread. */
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

export interface PublisherRequest {
  seq: number;
  loads: Record<string, unknown>[];
}

export interface PublisherReply {
  seq: number;
  frames: Uint8Array[];
}
