/** Messages between the main thread (src/main-thread/automation-host.ts) and the automation thread (thread.ts). */
import type { MasterConfig } from "../shared/config/defaults.js";

export interface AutomationInit {
  cfg: MasterConfig;
  log: { level: string; file: string | null; fileLevel: string | null };
  /** with `cluster_id`: who acts on an event or a scheduled fire (src/automation/owner.ts) */
  cluster?: { nodeId: string; ringBuffer: SharedArrayBuffer; health?: SharedArrayBuffer };
}

/** A request from the control socket (the reactor.* and schedule.* runners). */
export type AutomationRequest =
  | { op: "reactor.list" }
  | { op: "reactor.add"; event: string; reactors: string[] }
  | { op: "reactor.delete"; event: string }
  | { op: "reactor.stats" }
  | { op: "schedule.list" };

export type ToAutomation =
  /** a bus frame whose tag the main thread's filter let through (bytes, transferred) */
  | { t: "ev"; frame: Uint8Array }
  | { t: "req"; id: number; req: AutomationRequest }
  | { t: "stop" };

export type FromAutomation =
  /** the tag globs the main thread lets through (reactor map and, with a schedule, runner returns) */
  | { t: "globs"; globs: string[] }
  /** fire an event on this master's bus (`__schedule_return`) */
  | { t: "fire"; tag: string; data: unknown }
  | { t: "rep"; id: number; ok: boolean; ret: unknown }
  | { t: "stopped" };
