/**
 * What a minion may send, as options (issue 13, docs/security.md "minion"): the public keys `_auth`
 * takes, the lowest request envelope version served, per-minion bounds (mine data, pending keys), and
 * whether returns must be signed. Read once per configuration object through a typed reader: a bad value
 * is `CONFIG_INVALID` naming the option, at start (the main thread reads it before any worker starts).
 *
 * Options (defaults in brackets):
 * - `brine_minion_key_bits_min` [2048], `brine_minion_key_bits_max` [16384]: RSA modulus bounds of a
 *   minion's public key; `brine_minion_key_exponent` [65537]: the only public exponent taken.
 * - `brine_min_envelope_version` [0]: requests in an envelope below this version are refused (3: no v2
 *   minion, i.e. no 3006.8, is served; the sign-in, v2 or v3, is always answered so the minion can log why).
 * - `mine_max_size` [16, MiB]: the most mine data one minion keeps on the master (Salt-style name,
 *   megabytes as `file_recv_max_size`); a `_mine` that would exceed it is refused and logged.
 * - `max_pending_keys` [10000]: the most keys waiting in `minions_pre`; a new minion's key past it is
 *   answered "full" (the minion retries, as for `max_minions`) and not written.
 * - Salt's `require_minion_sign_messages` and `drop_messages_signature_fail` (src/master/return-sig.ts).
 */
import { BrineError } from "../errors.js";
import type { MasterConfig } from "../config/defaults.js";

export interface MinionPolicy {
  keyBitsMin: number;
  keyBitsMax: number;
  keyExponent: number;
  minEnvelopeVersion: number;
  mineBytesMax: number;
  pendingKeysMax: number;
}

/** Bounds on the bounds: RSA below 1024 bits is broken; above 16384 a sign-in costs seconds. */
const KEY_BITS_FLOOR = 1024;
const KEY_BITS_CEILING = 16384;
const MiB = 1024 * 1024;

function intOption(cfg: Record<string, unknown>, name: string, dflt: number, min: number, max: number): number {
  const v = cfg[name];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw new BrineError("CONFIG_INVALID", `${name}: must be an integer from ${min} to ${max}, got ${JSON.stringify(v)}`);
  }
  return v;
}

const cache = new WeakMap<object, MinionPolicy>();

/** The policy of this configuration (validated once per configuration object). */
export function minionPolicy(cfg: MasterConfig): MinionPolicy {
  let p = cache.get(cfg);
  if (p) return p;
  const o = cfg as unknown as Record<string, unknown>;
  const keyBitsMin = intOption(o, "brine_minion_key_bits_min", 2048, KEY_BITS_FLOOR, KEY_BITS_CEILING);
  const keyBitsMax = intOption(o, "brine_minion_key_bits_max", KEY_BITS_CEILING, keyBitsMin, KEY_BITS_CEILING);
  p = {
    keyBitsMin,
    keyBitsMax,
    keyExponent: intOption(o, "brine_minion_key_exponent", 65537, 3, 2 ** 31 - 1),
    minEnvelopeVersion: intOption(o, "brine_min_envelope_version", 0, 0, 3),
    mineBytesMax: intOption(o, "mine_max_size", 16, 1, 4096) * MiB,
    pendingKeysMax: intOption(o, "max_pending_keys", 10_000, 1, 10_000_000),
  };
  cache.set(cfg, p);
  return p;
}
