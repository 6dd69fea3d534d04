/**
 * What crosses the API thread's port (docs/ARCHITECTURE.md, "What crosses between threads").
 *
 * The messages are the style of src/shared/port-calls.ts: told apart by `k`, a call has an `id` and its answer
 * names it. API thread → main: `req` (a call: one encoded clear request body, `{"enc": "clear", "load": {...}}`,
 * exactly the bytes salt-api would send to the request port; the main thread submits it to the request lanes
 * like a frame from the ROUTER), `fire` (a webhook event, tag already sanitised), `listening`, `failed`, `stopped`
 * (the answer to `stop`: its request sockets and its listener are closed, the host ends it with endThread).
 * Main → API thread: `res` (the reply body for a `req`, as the request workers encoded it), `stop`.
 * The API thread never sees a key, and the main thread decodes nothing it forwards.
 */
import type { LogConfig } from "../shared/log.js";
import type { MasterConfig } from "../shared/config/defaults.js";

export interface ApiInit {
  cfg: MasterConfig;
  log: LogConfig;
}

export type ApiToMain =
  | { k: "req"; id: number; body: Uint8Array; source?: string }
  | { k: "fire"; tag: string; data: unknown }
  | { k: "listening"; port: number }
  | { k: "failed"; message: string }
  | { k: "stopped" };

export type MainToApi = { k: "res"; id: number; body: Uint8Array } | { k: "stop" };

/** The request-lane tag of a request that came from the API thread: its id there and which thread it was. */
export interface ApiTag {
  api: number;
  gen: number;
}
