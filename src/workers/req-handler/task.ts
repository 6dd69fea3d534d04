/** The messages that cross between the main thread and the request workers. */

export type Lane = "auth" | "req";

/** One batch of request bodies for one lane; the worker answers each in order. */
export interface BatchTask {
  kind: "batch";
  frames: Uint8Array[];
}

/** Background maintenance that needs the store (job cache cleanup). */
export interface MaintenanceTask {
  kind: "cleanup";
  nowMs: number;
}

export interface BatchResult {
  replies: Uint8Array[];
  /** packed event frames, in the order they were fired */
  events: Uint8Array[];
  /** publish loads for the publisher, in order */
  publishes: Record<string, unknown>[];
}

export interface CleanupResult {
  removed: number;
}
