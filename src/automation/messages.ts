/**
 * Messages between the main thread (src/main-thread/automation-host.ts) and the automation thread (thread.ts), in
 * the style of src/shared/port-calls.ts: told apart by `k`; a control request is a call (`req` with an id, answered
 * by `res` or `err` with that id).
 */
import type { PortError } from "../shared/port-calls.js";
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
  | { k: "ev"; frame: Uint8Array }
  | { k: "req"; id: number; req: AutomationRequest }
  /** the master stops: reactions and scheduled calls in flight get `drainMs`, then the thread closes its request sockets and answers `stopped` */
  | { k: "stop"; drainMs: number };

/** How long a stopping automation thread lets reactions and scheduled calls in flight finish before it cuts their requests to the master short, ms (the host waits 2 s more, automation-host.ts; AutomationDeps.stopDrainMs sets it). */
export const automationDrainMsMax = 8_000;

export type FromAutomation =
  /** the tag globs the main thread lets through (reactor map and, with a schedule, runner returns) */
  | { k: "globs"; globs: string[] }
  /** fire an event on this master's bus (`__schedule_return`) */
  | { k: "fire"; tag: string; data: unknown }
  | { k: "res"; id: number; ret: unknown }
  | ({ k: "err"; id: number } & PortError)
  /** its request sockets are closed (closeClientSockets) and its job cache: the host ends it (endThread) */
  | { k: "stopped" };
