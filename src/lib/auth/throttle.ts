/**
 * Failed-login throttling (beyond Salt, which only equalises failure timing): a pure module, clock
 * injected. Failures are counted per (user, source) and per source; past `failuresMax` within
 * `windowMs`, further attempts with that key are refused without asking the backend until the window
 * has passed since the last failure. Keying by (user, source) means a stranger guessing a user's
 * password from one address cannot lock that user out from the user's own address; the per-source
 * count slows a spray of many usernames from one address. Requests whose source is not known (the
 * ZeroMQ request port does not tell) are keyed by user alone.
 *
 * State is per request thread (bounded); with N threads on the clear lane an attacker gets at most N
 * times the budget, documented in docs/security.md.
 */

export interface ThrottleOptions {
  failuresMax: number;
  windowMs: number;
  /** distinct keys remembered; the oldest are forgotten first */
  keysMax: number;
}

export const defaultThrottle: ThrottleOptions = { failuresMax: 5, windowMs: 60_000, keysMax: 10_000 };

interface Entry {
  failures: number;
  last: number;
}

export type ThrottleVerdict = { ok: true } | { ok: false; retryAfterMs: number; key: string };

export class LoginThrottle {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly o: ThrottleOptions = defaultThrottle) {}

  private keys(user: string, source: string | undefined): string[] {
    return source ? [`u:${user}\0s:${source}`, `s:${source}`] : [`u:${user}`];
  }

  /** May this attempt go to the backend? */
  check(user: string, source: string | undefined, now: number): ThrottleVerdict {
    for (const key of this.keys(user, source)) {
      const e = this.entries.get(key);
      if (!e) continue;
      if (now - e.last >= this.o.windowMs) {
        this.entries.delete(key);
        continue;
      }
      // the per-source budget is wider: many users behind one NAT address are not one attacker
      const max = key.startsWith("s:") ? this.o.failuresMax * 4 : this.o.failuresMax;
      if (e.failures >= max) return { ok: false, retryAfterMs: this.o.windowMs - (now - e.last), key };
    }
    return { ok: true };
  }

  failed(user: string, source: string | undefined, now: number): void {
    for (const key of this.keys(user, source)) {
      const e = this.entries.get(key);
      if (e && now - e.last < this.o.windowMs) {
        e.failures++;
        e.last = now;
        this.entries.delete(key);
        this.entries.set(key, e);
      } else {
        this.entries.delete(key);
        this.entries.set(key, { failures: 1, last: now });
      }
      if (this.entries.size > this.o.keysMax) this.entries.delete(this.entries.keys().next().value!);
    }
  }

  /** A success clears the (user, source) count, not the source's. */
  succeeded(user: string, source: string | undefined): void {
    this.entries.delete(source ? `u:${user}\0s:${source}` : `u:${user}`);
  }
}
