/**
 * A return's `sig` (Salt's `minion_sign_messages`): PKCS#1 v1.5 SHA-1 over the msgpack of the return load
 * as the minion built it, before its request channel added `nonce`, `ts` and `tok` (salt/minion.py
 * `_return_pub`, salt/crypt.py `sign_message`). Salt's master re-serialises the load it decoded (less
 * `sig`); brine takes the minion's own bytes of each entry from the request's plaintext, so the signed
 * bytes are exactly the minion's whatever msgpack library made them.
 *
 * Salt's rules (master.py `AESFuncs._return`): with `require_minion_sign_messages`, a return without
 * `sig` is refused; a `sig` that does not verify is refused when `drop_messages_signature_fail` is set.
 * brine also refuses an invalid `sig` when `require_minion_sign_messages` is set: requiring signatures
 * while taking wrong ones would protect nothing.
 */
import type { KeyObject } from "node:crypto";
import { asBytes, encodeWire, mapHeaderBytes, writeMapHeader, type MapEntrySpans, type WireValue } from "../../shared/protocol/msgpack.js";
import { rsaVerify } from "../../shared/protocol/rsa.js";
import { rsaBlockBytesMax } from "../../shared/protocol/limits.js";

/** What the request channel adds after the minion signed (v3 adds ts; the id was in the load already). */
const ADDED_BY_CHANNEL: ReadonlySet<string> = new Set(["sig", "nonce", "tok"]);

function signedBytes(spans: MapEntrySpans, drop: ReadonlySet<string>, dropTs: boolean): Buffer {
  const src = spans.buf!;
  let n = 0;
  let bytes = 0;
  for (let i = 0; i < spans.keys.length; i++) {
    const k = spans.keys[i]!;
    if (drop.has(k) || (dropTs && k === "ts")) continue;
    n++;
    bytes += spans.ends[i]! - spans.starts[i]!;
  }
  const out = Buffer.allocUnsafe(mapHeaderBytes(n) + bytes);
  let pos = writeMapHeader(out, 0, n);
  for (let i = 0; i < spans.keys.length; i++) {
    const k = spans.keys[i]!;
    if (drop.has(k) || (dropTs && k === "ts")) continue;
    pos += src.copy(out, pos, spans.starts[i]!, spans.ends[i]!);
  }
  return out;
}

/** True when `load.sig` is the minion's signature of the load. `raw`: the load's entries as they came. */
export function returnSignatureValid(key: KeyObject | undefined, load: Record<string, WireValue>, raw: MapEntrySpans | undefined): boolean {
  const sig = asBytes(load.sig);
  if (!key || !sig || sig.length > rsaBlockBytesMax) return false;
  if (raw?.buf) {
    // without ts (what a v3 minion signed), then with it (a load that carried its own ts, or a v2 minion)
    return rsaVerify(key, signedBytes(raw, ADDED_BY_CHANNEL, true), sig) || rsaVerify(key, signedBytes(raw, ADDED_BY_CHANNEL, false), sig);
  }
  const { sig: _s, nonce: _n, tok: _t, ts: _ts, ...rest } = load;
  return rsaVerify(key, encodeWire(rest), sig);
}
