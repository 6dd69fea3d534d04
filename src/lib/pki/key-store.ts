/**
 * Minion keys in pki_dir, laid out as Salt's: `minions/` (accepted), `minions_pre/` (pending),
 * `minions_rejected/`, `minions_denied/`, `minions_autosign/` (one-shot autosign stubs). The directory
 * is the source of truth, shared with `salt-key` whether or not the master runs; every id reaching a
 * path here has passed validId first.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { validId } from "../../shared/protocol/ids.js";
import { BrineError } from "../../shared/errors.js";

export type KeyState = "accepted" | "pending" | "rejected" | "denied";
export const KEY_DIRS: Record<KeyState, string> = {
  accepted: "minions",
  pending: "minions_pre",
  rejected: "minions_rejected",
  denied: "minions_denied",
};
export const AUTOSIGN_DIR = "minions_autosign";

/** A directory listing is trusted from cache only when the directory changed longer ago than this (ms). */
export const racyMs = 1000;

export class KeyStore {
  constructor(readonly pkiDir: string) {}

  ensureDirs(): void {
    for (const d of [...Object.values(KEY_DIRS), AUTOSIGN_DIR]) mkdirSync(path.join(this.pkiDir, d), { recursive: true, mode: 0o700 });
  }

  file(state: KeyState, id: string): string {
    if (!validId(id)) throw new BrineError("BAD_ID", JSON.stringify(id));
    return path.join(this.pkiDir, KEY_DIRS[state], id);
  }

  exists(state: KeyState, id: string): boolean {
    return existsSync(this.file(state, id));
  }

  isDirectory(state: KeyState, id: string): boolean {
    try {
      return statSync(this.file(state, id)).isDirectory();
    } catch {
      return false;
    }
  }

  read(state: KeyState, id: string): string | undefined {
    try {
      return readFileSync(this.file(state, id), "utf8");
    } catch {
      return undefined;
    }
  }

  write(state: KeyState, id: string, pub: string): void {
    const f = this.file(state, id);
    mkdirSync(path.dirname(f), { recursive: true, mode: 0o700 });
    writeFileSync(f, pub, { mode: 0o644 });
  }

  move(from: KeyState, to: KeyState, id: string): void {
    const dst = this.file(to, id);
    mkdirSync(path.dirname(dst), { recursive: true, mode: 0o700 });
    renameSync(this.file(from, id), dst);
  }

  remove(state: KeyState, id: string): boolean {
    const f = this.file(state, id);
    if (!existsSync(f)) return false;
    rmSync(f, { force: true });
    return true;
  }

  /** Ids in one state, sorted; dotfiles and invalid names are ignored (Salt skips dotfiles). */
  list(state: KeyState): string[] {
    const dir = path.join(this.pkiDir, KEY_DIRS[state]);
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return [];
    }
    return names.filter((n) => !n.startsWith(".") && validId(n)).sort();
  }

  /**
   * `list`, remembered while the directory is unchanged: a publish asks for the accepted ids every time,
   * and a readdir of 100k keys per publish is tens of milliseconds. The directory's mtime changes with
   * every key added or removed; a listing is trusted only when that mtime is over `racyMs` old, so two
   * changes within one tick of the filesystem's clock (a stat cannot tell them apart) are never missed.
   */
  listCached(state: KeyState, nowMs = Date.now()): readonly string[] {
    const dir = path.join(this.pkiDir, KEY_DIRS[state]);
    let mtimeMs: number;
    try {
      mtimeMs = statSync(dir).mtimeMs;
    } catch {
      this.listings.delete(state);
      return [];
    }
    const hit = this.listings.get(state);
    if (hit && hit.mtimeMs === mtimeMs && hit.readAtMs - mtimeMs > racyMs) return hit.names;
    const names = this.list(state);
    this.listings.set(state, { mtimeMs, readAtMs: nowMs, names });
    return names;
  }

  private readonly listings = new Map<KeyState, { mtimeMs: number; readAtMs: number; names: readonly string[] }>();

  /** States an id has a key in (normally zero or one). */
  statesOf(id: string): KeyState[] {
    return (Object.keys(KEY_DIRS) as KeyState[]).filter((s) => this.exists(s, id));
  }

  autosignStub(id: string): string {
    if (!validId(id)) throw new BrineError("BAD_ID", JSON.stringify(id));
    return path.join(this.pkiDir, AUTOSIGN_DIR, id);
  }
}

/**
 * A per-thread cache of accepted public keys for the hot request path (the v3 `tok` check needs the
 * minion's key on every request). Entries live `ttlMs`; a key deleted by salt-key stops working within
 * that time (Salt reads the file every time; a 1 s window costs nothing and saves a syscall per request).
 * Absent keys are never cached.
 */
export class AcceptedKeyCache {
  private readonly entries = new Map<string, { pem: string | undefined; at: number }>();
  constructor(
    private readonly store: KeyStore,
    private readonly ttlMs: number,
    private readonly entriesMax: number,
    private readonly now: () => number = Date.now,
  ) {}

  get(id: string): string | undefined {
    const t = this.now();
    const e = this.entries.get(id);
    if (e && t - e.at < this.ttlMs) return e.pem;
    const pem = this.store.read("accepted", id);
    this.entries.delete(id);
    // Only keys that exist are cached: a minion whose key was just (re)accepted by another thread
    // (the clear lane) must be recognised by its very next request, which real minions send at once.
    if (pem === undefined) return undefined;
    if (this.entries.size >= this.entriesMax) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(id, { pem, at: t });
    return pem;
  }

  invalidate(id?: string): void {
    if (id === undefined) this.entries.clear();
    else this.entries.delete(id);
  }
}
