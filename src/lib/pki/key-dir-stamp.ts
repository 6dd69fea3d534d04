/**
 * Whether a key directory (`minions/`, `minions_rejected/`, ...) may have changed since a thread read a key
 * from it, without a system call per key: the directory's mtime changes whenever a key file is created,
 * deleted or renamed in it (salt-key's accept, reject and delete; brine's own writes, which rename a
 * complete temp file into place), and it is read at most every `checkMs` per thread. A change bumps
 * `version`; what a thread read under one version is still what the directory holds while the version is
 * the same.
 *
 * Two changes within one tick of the filesystem's clock leave the same mtime, so a version is only
 * vouched for when the mtime it was seen with was over `racyMs` older than the stat that saw it (what
 * `KeyStore.listCached` does for listings): until then `current()` answers undefined and callers fall back
 * to their time-bounded reads. An in-place rewrite of a file (`cp` over an accepted key) leaves the
 * directory's mtime alone: callers bound how long they trust a version-checked copy (`trustMsMax`).
 *
 * Pure: the stat and the clock are injected (the shell passes `statSync(dir).mtimeMs`).
 */

/** How often a thread stats a key directory, at most, ms. */
export const keyDirCheckMs = 250;
/** A directory mtime younger than this (at the stat that read it) is not vouched for, ms (KeyStore's racyMs). */
export const keyDirRacyMs = 1000;

export class KeyDirStamp {
  private version = 0;
  /** null: never looked at */
  private mtimeMs: number | undefined | null = null;
  private checkedAt = -Infinity;

  constructor(
    /** the directory's mtime in ms, or undefined when it cannot be read */
    private readonly mtimeOf: () => number | undefined,
    private readonly checkMs = keyDirCheckMs,
    private readonly racyMs = keyDirRacyMs,
  ) {}

  /**
   * The directory's version at `now` (stat'ing it when the last look is `checkMs` old, or the clock went
   * back), or undefined when it cannot be vouched for: unreadable, or changed less than `racyMs` before it
   * was looked at. Take it before reading a key: a change after the read moves it on.
   */
  current(now: number): number | undefined {
    if (now - this.checkedAt >= this.checkMs || now < this.checkedAt) {
      const m = this.mtimeOf();
      if (m !== this.mtimeMs) {
        this.version++;
        this.mtimeMs = m;
      }
      this.checkedAt = now;
    }
    if (this.mtimeMs === undefined || this.mtimeMs === null || this.checkedAt - this.mtimeMs <= this.racyMs) return undefined;
    return this.version;
  }

  /**
   * The directory's mtime at `now` when `current(now)` vouches for it, else undefined: what a copy shared with
   * other threads records (their stamps' versions are their own; the mtime they vouch for is the directory's).
   */
  vouchedMtime(now: number): number | undefined {
    return this.current(now) === undefined ? undefined : (this.mtimeMs as number);
  }

  /** This thread changed the directory: look at it again at the next `current()`. */
  touch(): void {
    this.checkedAt = -Infinity;
  }
}
