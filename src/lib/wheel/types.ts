/**
 * The contract of a wheel function (Salt's `salt/wheel/<module>.py`): what the `wheel` clear command
 * and the HTTP API's `wheel` client run, after authorization, in a request worker. A function gets the
 * keyword arguments the client sent (Salt calls wheel functions with `**kwarg`; positional `arg` are
 * mapped onto the function's parameter names by the caller) and returns Salt's return value for it.
 * Effects on the master (a key accepted or deleted: the main thread fires `salt/key`, invalidates caches,
 * rotates the AES key on delete) go through `WheelContext.note`, as salt-key's changes do.
 */
import type { MasterConfig } from "../../shared/config/defaults.js";

export interface WheelContext {
  cfg: MasterConfig;
  /** tell the main thread of a key-state change ("accept:<id>", "reject:<id>", "delete:<id>", as salt-key does) */
  note(change: string): void;
  /** fire an event on this master's bus (e.g. salt/key) */
  fire(tag: string, data: unknown): void;
  /** ids this master counts as connected (minions.connected) */
  connectedIds(): Promise<string[]>;
  now(): number;
}

export interface WheelFunction {
  /** parameter names in order, so positional args can be mapped as Salt's format_call does */
  readonly params: readonly string[];
  run(ctx: WheelContext, kwarg: Record<string, unknown>): Promise<unknown> | unknown;
}
