/**
 * Per-minion session keys (protocol v3): `cachedir/sessions/<id>` holds a Crypticle key string (0600,
 * written to a temp file and renamed), replaced when older than `publish_session`. Read on each auth
 * and each v3 request decode, so each thread caches key + mtime for a second at most (the file is the
 * truth shared by all threads and, in a cluster, all masters).
 */
import { linkSync, mkdirSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Crypticle, generateKeyString } from "../protocol/crypticle.js";
import { validId } from "../protocol/ids.js";
import { BrineError } from "../errors.js";

const cacheTtlMs = 1000;
const cacheEntriesMax = 200_000;

/**
 * Write a fresh key: complete in a temp file first, then either link it into place only if no key
 * exists yet (`create`: two threads answering the same minion's re-sent `_auth` agree on the one key
 * that won), or rename it over an expired one (`replace`).
 */
export function writeSessionKeyFile(file: string, mode: "create" | "replace"): void {
  const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  writeFileSync(tmp, generateKeyString(), { mode: 0o600 });
  if (mode === "replace") {
    renameSync(tmp, file);
    return;
  }
  try {
    linkSync(tmp, file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
  } finally {
    unlinkSync(tmp);
  }
}

export class SessionKeys {
  private readonly cache = new Map<string, { key: string; crypticle: Crypticle; mtimeMs: number; checkedAt: number }>();
  readonly dir: string;

  constructor(
    cachedir: string,
    private readonly publishSessionS: number,
    private readonly now: () => number = Date.now,
  ) {
    this.dir = path.join(cachedir, "sessions");
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  /** The session key for `id`, creating or renewing the file as Salt's session_key does. */
  get(id: string): { key: string; crypticle: Crypticle } {
    if (!validId(id)) throw new BrineError("BAD_ID", JSON.stringify(id));
    const t = this.now();
    const c = this.cache.get(id);
    const maxAgeMs = this.publishSessionS * 1000;
    if (c && t - c.checkedAt < cacheTtlMs && t - c.mtimeMs < maxAgeMs) return c;
    const file = path.join(this.dir, id);
    let st;
    try {
      st = statSync(file);
      if (t - st.mtimeMs > maxAgeMs) {
        writeSessionKeyFile(file, "replace");
        st = statSync(file);
      }
    } catch {
      writeSessionKeyFile(file, "create");
      st = statSync(file);
    }
    if (c && c.mtimeMs === st.mtimeMs) {
      c.checkedAt = t;
      return c;
    }
    const key = readFileSync(file, "latin1").trim();
    const entry = { key, crypticle: new Crypticle(key), mtimeMs: st.mtimeMs, checkedAt: t };
    if (this.cache.size >= cacheEntriesMax) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(id, entry);
    return entry;
  }
}
