/** Messages between the control server (main thread) and a runner thread. */
import type { MasterConfig } from "../config/defaults.js";
import type { RunnerClusterLink } from "../master/cluster-node.js";

export interface RunnerInit {
  cfg: MasterConfig;
  fun: string;
  arg: unknown[];
  kwarg: Record<string, unknown>;
  log: { level: string; file: string | null; fileLevel: string | null };
  /** when `cluster_id` is set: the shared ring buffer and a port to the Raft worker (in the transfer list) */
  cluster?: RunnerClusterLink;
}

export type RunnerMessage = { type: "print"; text: string } | { type: "return"; ret: unknown } | { type: "error"; message: string };

/** main → runner: every bus event while the runner runs */
export interface RunnerEvent {
  type: "event";
  frame: Uint8Array;
}
