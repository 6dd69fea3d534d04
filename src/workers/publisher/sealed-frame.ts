/**
 * Whether a publish frame another master of the cluster sealed (channel `cl/pub`, src/main-thread/cluster/forwarding.ts)
 * can go to this master's subscribers as it came, or why not. Pure: the publisher thread injects the key checks.
 *
 * Under `cluster_id` every master shares the cluster key pair and the publish AES key (`cluster_aes`) and a publish
 * carries no serial, so the frame the origin sealed (`{enc: "aes", load, sig?, sig_algo?}`, Salt's
 * `MasterPubServerChannel.wrap_payload`) is one this master would send. It is sent as it came only when it is
 * what a minion of this master accepts (salt/channel/client.py `_decode_payload`): the shape this master's own
 * frames have, a signature exactly when this master signs (`sign_pub_messages`, its `publish_signing_algorithm`)
 * that verifies with the cluster key, and a load sealed under this master's current AES key (its HMAC checked, not
 * decrypted). Otherwise (a key rotation not yet seen on both sides, masters configured apart, a frame damaged or
 * forged) the publisher seals the load itself, as Salt's peers always do.
 */
import { asBytes, decodeWire, isMap } from "../../shared/protocol/msgpack.js";

/** bytes of one forwarded sealed frame at most (the peer channel's own frame bound is larger) */
export const sealedFrameBytesMax = 16 * 1024 * 1024;

/** The keys a publish frame brine seals has (wrap in worker.ts): no other is sent on. */
const FRAME_KEYS = new Set(["enc", "load", "sig", "sig_algo"]);

export interface SealedFrameRules {
  /** this master's `sign_pub_messages` */
  signed: boolean;
  /** this master's `publish_signing_algorithm` */
  sigAlgo: string;
  /** whether `sealed` is sealed under this master's current publish AES key (its HMAC) */
  authentic(sealed: Buffer): boolean;
  /** whether `sig` is the cluster key's signature of `sealed` under `sigAlgo` */
  verifies(sealed: Buffer, sig: Buffer): boolean;
}

/** undefined when `frame` can be sent as it came; otherwise why it cannot (for the log line). */
export function sealedFrameFault(frame: Uint8Array, rules: SealedFrameRules): string | undefined {
  if (frame.byteLength > sealedFrameBytesMax) return `${frame.byteLength} bytes, above ${sealedFrameBytesMax}`;
  let env: unknown;
  try {
    env = decodeWire(frame, undefined, true);
  } catch (e) {
    return `not a msgpack frame (${(e as Error).message})`;
  }
  if (!isMap(env)) return "not a map";
  for (const k of Object.keys(env)) if (!FRAME_KEYS.has(k)) return `unexpected key ${JSON.stringify(k.slice(0, 40))}`;
  if (env.enc !== "aes") return `enc is ${JSON.stringify(env.enc)}, not "aes"`;
  // bytes that happen to be UTF-8 decode as text (msgpack.ts): asBytes gives them back
  const load = typeof env.load === "string" || Buffer.isBuffer(env.load) ? asBytes(env.load) : undefined;
  if (!load) return "its load is not bytes";
  const sig = typeof env.sig === "string" || Buffer.isBuffer(env.sig) ? asBytes(env.sig) : undefined;
  if (rules.signed) {
    if (!sig) return "unsigned, and this master signs its publishes";
    if (env.sig_algo !== rules.sigAlgo) return `sig_algo ${JSON.stringify(env.sig_algo)} is not this master's ${rules.sigAlgo}`;
  } else if (env.sig !== undefined || env.sig_algo !== undefined) {
    return "signed, and this master does not sign its publishes";
  }
  if (!rules.authentic(load)) return "not sealed under this master's current AES key";
  if (rules.signed && !rules.verifies(load, sig!)) return "its signature does not verify with the cluster key";
  return undefined;
}
