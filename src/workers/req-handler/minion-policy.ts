/**
 * What a minion may send, as options (issue 13, docs/security.md "minion"): the public keys `_auth`
 * takes, the lowest request envelope version served, per-minion bounds (mine data, pending keys), and
 * whether returns must be signed. Read once per configuration object through a typed reader: a bad value
 * is `CONFIG_INVALID` naming the option, at start (the main thread reads it before any worker starts).
 *
 * Options (declared with their types, bounds and defaults in src/shared/config/schema.ts; defaults in brackets):
 * - `brine_minion_key_bits_min` [2048], `brine_minion_key_bits_max` [16384]: RSA modulus bounds of a
 *   minion's public key; `brine_minion_key_exponent` [65537]: the only public exponent taken.
 * - `brine_min_envelope_version` [0]: requests in an envelope below this version are refused (3: no v2
 *   minion, i.e. no 3006.8, is served; the sign-in, v2 or v3, is always answered so the minion can log why).
 * - `mine_max_size` [16, MiB]: the most mine data one minion keeps on the master (Salt-style name,
 *   megabytes as `file_recv_max_size`); a `_mine` that would exceed it is refused and logged.
 * - `max_pending_keys` [10000]: the most keys waiting in `minions_pre`; a new minion's key past it is
 *   answered "full" (the minion retries, as for `max_minions`) and not written.
 * - Salt's `require_minion_sign_messages` and `drop_messages_signature_fail` (src/workers/req-handler/return-sig.ts).
 */
import { BrineError } from "../../shared/errors.js";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { readOption } from "../../shared/config/options.js";

export interface MinionPolicy {
  keyBitsMin: number;
  keyBitsMax: number;
  keyExponent: number;
  minEnvelopeVersion: number;
  mineBytesMax: number;
  pendingKeysMax: number;
}

const MiB = 1024 * 1024;

const cache = new WeakMap<object, MinionPolicy>();

/** The policy of this configuration (validated once per configuration object). */
export function minionPolicy(cfg: MasterConfig): MinionPolicy {
  let p = cache.get(cfg);
  if (p) return p;
  // bounds on the bounds (schema.ts): RSA below 1024 bits is broken; above 16384 a sign-in costs seconds
  const keyBitsMin = readOption(cfg, "brine_minion_key_bits_min");
  const keyBitsMax = readOption(cfg, "brine_minion_key_bits_max");
  if (keyBitsMax < keyBitsMin) throw new BrineError("CONFIG_INVALID", `brine_minion_key_bits_max: must be at least brine_minion_key_bits_min (${keyBitsMin}), got ${keyBitsMax}`);
  p = {
    keyBitsMin,
    keyBitsMax,
    keyExponent: readOption(cfg, "brine_minion_key_exponent"),
    minEnvelopeVersion: readOption(cfg, "brine_min_envelope_version"),
    mineBytesMax: readOption(cfg, "mine_max_size") * MiB,
    pendingKeysMax: readOption(cfg, "max_pending_keys"),
  };
  cache.set(cfg, p);
  return p;
}
