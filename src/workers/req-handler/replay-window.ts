/**
 * How long a captured request frame can be replayed: never, once its nonce is known, and never once it is older
 * than the time window (issue #13).
 *
 * - Every dispatched AES request's nonce is remembered replayWindowMs to twice that (src/shared/nonce-set.ts), on
 *   disk across restarts (src/shared/nonce-journal.ts) and, clustered, on every master (the origin forwards the
 *   nonces it accepted with its events, src/main-thread/cluster/forwarding.ts); a copy sent to two masters at the
 *   same instant is acted on once: the master that decides for the minion is asked first (src/shared/nonce-owner.ts).
 * - A protocol v3 request carries `ts` (the minion's clock, whole seconds; 3007 sends it, 3006's v2 does not). By
 *   default brine refuses a v3 request whose `ts` is more than `brine_request_ts_window_s` (300 s) away from its
 *   own clock, in either direction, so no nonce needs remembering longer than the window: with replayWindowMs at
 *   twice it, a frame replayed at any later time is refused by one check or the other, on every master.
 *   The cost: a v3 minion whose clock is off by more than the window is refused ("bad load", then a sign-in, a
 *   resend, refused again) until its clock is fixed; `brine_request_ts_window_s: 0` turns the check off.
 * - Salt's own `request_server_ttl`, when set (> 0), replaces it with Salt's rule: refused when older than that
 *   many seconds, never for being ahead.
 * - A v2 request (3006) has no time in it: only its nonce protects it, for the nonce window; later it is accepted
 *   while the publish AES key it was made with lives (as in Salt, which has no nonce check at all).
 */
import { BrineError } from "../../shared/errors.js";

/** how long a request nonce is remembered (between one and two of these) */
export const replayWindowMs = 10 * 60 * 1000;
/** the default `brine_request_ts_window_s`: half the nonce window, so a frame within it is always remembered */
export const REQUEST_TS_WINDOW_S_DEFAULT = replayWindowMs / 2000;

const cache = new WeakMap<object, number>();

/** `brine_request_ts_window_s` of this config (validated: an integer from 0 to replayWindowMs/2000 seconds). */
export function requestTsWindowS(cfg: object): number {
  const hit = cache.get(cfg);
  if (hit !== undefined) return hit;
  const v = (cfg as { brine_request_ts_window_s?: unknown }).brine_request_ts_window_s;
  const s = v === undefined || v === null ? REQUEST_TS_WINDOW_S_DEFAULT : v;
  if (typeof s !== "number" || !Number.isInteger(s) || s < 0 || s > REQUEST_TS_WINDOW_S_DEFAULT) {
    throw new BrineError("CONFIG_INVALID", `brine_request_ts_window_s: must be an integer from 0 (off) to ${REQUEST_TS_WINDOW_S_DEFAULT} seconds (the replay nonce window covers no more), got ${JSON.stringify(v)}`);
  }
  cache.set(cfg, s);
  return s;
}

/**
 * Why a v3 request's `ts` is refused (a log line), or undefined when it is fresh. `ttl`: Salt's
 * request_server_ttl (> 0: Salt's one-sided rule instead of the window).
 */
export function staleTs(ts: unknown, nowMs: number, ttl: number, windowS: number): string | undefined {
  const age = nowMs / 1000 - Number(ts);
  if (ttl > 0) return typeof ts === "number" && age <= ttl ? undefined : `expired ttl: ${Math.round(age)} > ${ttl}`;
  if (windowS === 0) return undefined;
  if (typeof ts !== "number" || !Number.isFinite(ts)) return "no ts";
  if (age > windowS) return `expired ttl: ${Math.round(age)} > ${windowS} (brine_request_ts_window_s; is the minion's clock behind?)`;
  if (-age > windowS) return `ts ${Math.round(-age)} s in the future > ${windowS} (brine_request_ts_window_s; is the minion's clock ahead?)`;
  return undefined;
}
