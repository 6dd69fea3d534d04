/** A value a minion sent, as a log line or a refusal may show it: never throws (a map without a prototype has no toString), bounded. */
export function shown(v: unknown, max = 64): string {
  if (typeof v === "string") return v.slice(0, max);
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint" || v === null || v === undefined) return String(v);
  try {
    return (JSON.stringify(v, (_k, x) => (x instanceof Uint8Array ? `<${x.length} bytes>` : typeof x === "bigint" ? String(x) : x)) ?? typeof v).slice(0, max);
  } catch {
    return `<${typeof v}>`;
  }
}
