/**
 * Per-minion session keys (protocol v3) across masters that do not share `cachedir` (pure: the file's text
 * format and the merge rule; the file I/O is in src/lib/store/sessions.ts).
 *
 * The key a minion uses is the one its last auth reply carried, and no master can know which reply that was
 * when two masters created keys for it at the same moment (a re-sent `_auth` that the balancer sent
 * elsewhere). So no live key is ever thrown away: each master keeps, per minion, the current key (what its
 * auth replies hand out) and the other live keys it has heard of (at most sessionAltsMax, newest first),
 * and accepts a request encrypted with any of them. A key lives `publish_session` from its creation on every
 * master (its creation time travels with it), so a minion holding the key that lost is treated exactly as a
 * single master would treat it: it keeps working until its key expires, then signs in again.
 *
 * The current key is the newest (creation time, then the key text): every master that has heard of the same
 * keys names the same one current, so new sign-ins anywhere converge on one key.
 *
 * File text: the current key on the first line (what a single master writes), then one `<key> <created ms>`
 * line per other live key. The current key's creation time is the file's mtime.
 */

export interface HeldKey {
  key: string;
  /** creation, ms since the epoch */
  t: number;
}

export interface SessionKeySet {
  current: HeldKey;
  /** other live keys, newest first */
  alts: HeldKey[];
}

/** other live keys kept per minion besides the current one */
export const sessionAltsMax = 3;

const KEY_LINE = /^([A-Za-z0-9+/]{75}=) (\d{1,16})$/;

export function parseSessionFile(text: string, mtimeMs: number): SessionKeySet | undefined {
  const lines = text.split("\n").map((l) => l.trim());
  const key = lines[0];
  if (!key) return undefined;
  const alts: HeldKey[] = [];
  for (const l of lines.slice(1)) {
    const m = KEY_LINE.exec(l);
    if (m) alts.push({ key: m[1]!, t: Number(m[2]) });
  }
  return { current: { key, t: Math.floor(mtimeMs) }, alts };
}

export function formatSessionFile(set: SessionKeySet): string {
  return [set.current.key, ...set.alts.map((a) => `${a.key} ${a.t}`)].join("\n") + "\n";
}

const live = (k: HeldKey, nowMs: number, lifetimeMs: number) => nowMs - k.t < lifetimeMs;

/** The other keys of `set` that have not expired (what a request may also be encrypted with). */
export function liveAlts(set: SessionKeySet, nowMs: number, lifetimeMs: number): HeldKey[] {
  return set.alts.filter((a) => a.key !== set.current.key && live(a, nowMs, lifetimeMs));
}

function newer(a: HeldKey, b: HeldKey): boolean {
  return a.t !== b.t ? a.t > b.t : a.key > b.key;
}

/**
 * `local` with `incoming` added: the newest live key current, the other live ones as alternates. Undefined when
 * nothing changes (the key is known already, or it has expired).
 */
export function mergeSessionKeys(local: SessionKeySet | undefined, incoming: HeldKey, nowMs: number, lifetimeMs: number): SessionKeySet | undefined {
  if (!live(incoming, nowMs, lifetimeMs)) return undefined;
  const known = local ? [local.current, ...local.alts] : [];
  const same = known.find((k) => k.key === incoming.key);
  if (same && same.t >= incoming.t) return undefined;
  const byKey = new Map<string, HeldKey>();
  for (const k of [...known, incoming]) {
    if (!live(k, nowMs, lifetimeMs)) continue;
    const had = byKey.get(k.key);
    if (!had || k.t > had.t) byKey.set(k.key, k);
  }
  const sorted = [...byKey.values()].sort((a, b) => (newer(a, b) ? -1 : 1));
  const next: SessionKeySet = { current: sorted[0]!, alts: sorted.slice(1, 1 + sessionAltsMax) };
  if (local && next.current.key === local.current.key && next.current.t === local.current.t && next.alts.length === local.alts.length && next.alts.every((a, i) => a.key === local.alts[i]!.key && a.t === local.alts[i]!.t)) return undefined;
  return next;
}
