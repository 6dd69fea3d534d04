/**
 * Requests waiting for their minion's session key, or its accepted key, to arrive from a peer (clustered masters,
 * protocol v3).
 *
 * Behind a load balancer a minion signs in on one master (its sign-in channel is a connection of its own) and sends
 * its next request, `_pillar` first, over its request channel, which the balancer may have put on another master. The
 * session key the sign-in made travels to the peers with the sign-in's batch result (sync-outbox.ts), the
 * request may get there first. Answered "bad load" at once, the minion signs in again (perhaps on a third master
 * that has no key yet either) and resends once; a second "bad load" fails the request (Salt's minion: "the master
 * answered bad load again after re-authentication"). So a request no key this master holds opens waits here, a
 * bounded time, for a key that opens it; then it is handled as if it had just come, or answered "bad load".
 * In the isolated-filesystem topology a new minion's key, accepted (auto_accept) by the master it signed in on,
 * reaches the others by state-sync's key channels (a 2 s tick, then the peer's pull), so its first requests on
 * another master wait here for the accepted key as well, longer (acceptedKeyWaitMsMax).
 *
 * A pure core: the clock and the check are injected, and the shell (request.ts) calls tick() from one coarse
 * timer per thread while anything waits. Bounded per thread (waiting requests, their bytes) and per minion, so
 * frames sealed with no key at all (anyone may send them, naming any id) cost a bounded wait, never a pile.
 */

/** how long a request waits for its minion's session key from a peer before it is answered "bad load", ms */
export const sessionKeyWaitMsMax = 2_000;
/**
 * how long a request waits for its minion's accepted key from a peer (isolated filesystems: state-sync's key
 * channels tick every 2 s, then the peer pulls), ms
 */
export const acceptedKeyWaitMsMax = 8_000;
/** how often the waiting requests are checked against the keys this master holds, ms */
export const sessionKeyCheckMs = 25;
/** requests one thread holds waiting for keys, count; past it a request is answered "bad load" at once */
export const sessionKeyWaitersMax = 256;
/** bytes of the requests one thread holds waiting for keys; past it a request is answered "bad load" at once */
export const sessionKeyWaitBytesMax = 16 * 1024 * 1024;
/** requests of one minion waiting at once, count */
export const sessionKeyWaitersPerMinionMax = 8;

/** Why a request was not let wait (answered "bad load" at once). */
export type NoWait = "waiters" | "bytes" | "minion";

interface Waiter {
  id: string;
  /** the request's bytes (what it holds while it waits) */
  bytes: number;
  /** whether what it waits for is here now */
  ready: () => boolean;
  deadline: number;
  done: (opened: boolean) => void;
}

export class SessionKeyWaits {
  private waiting: Waiter[] = [];
  private bytes = 0;
  private readonly perMinion = new Map<string, number>();

  constructor(private readonly now: () => number) {}

  /** Requests waiting now. */
  get size(): number {
    return this.waiting.length;
  }

  /**
   * Let a request of minion `id` (`bytes` long) wait for what it lacks: `done(true)` once `ready()` says it is here
   * (the request is then handled anew), `done(false)` after `waitMs`. Returns why it may not wait instead, when a
   * bound is reached.
   */
  wait(id: string, bytes: number, waitMs: number, ready: () => boolean, done: (opened: boolean) => void): NoWait | undefined {
    if (this.waiting.length >= sessionKeyWaitersMax) return "waiters";
    if (this.bytes + bytes > sessionKeyWaitBytesMax) return "bytes";
    const mine = this.perMinion.get(id) ?? 0;
    if (mine >= sessionKeyWaitersPerMinionMax) return "minion";
    this.perMinion.set(id, mine + 1);
    this.bytes += bytes;
    this.waiting.push({ id, bytes, ready, deadline: this.now() + waitMs, done });
    return undefined;
  }

  /** One check of every waiting request: the opened and the expired leave. True while any still waits. */
  tick(): boolean {
    const now = this.now();
    const still: Waiter[] = [];
    const leaving: [Waiter, boolean][] = [];
    for (const w of this.waiting) {
      const opened = w.ready();
      if (opened || now >= w.deadline) leaving.push([w, opened]);
      else still.push(w);
    }
    this.waiting = still;
    for (const [w] of leaving) {
      this.bytes -= w.bytes;
      const left = (this.perMinion.get(w.id) ?? 1) - 1;
      if (left > 0) this.perMinion.set(w.id, left);
      else this.perMinion.delete(w.id);
    }
    for (const [w, opened] of leaving) w.done(opened);
    return still.length > 0;
  }
}

/** The shell: one timer per thread, ticking the core while anything waits. */
export class SessionKeyWaitRoom {
  private timer: NodeJS.Timeout | undefined;

  constructor(readonly core: SessionKeyWaits) {}

  /** A promise of whether what the request lacks came within `waitMs`, or why it may not wait. */
  wait(id: string, bytes: number, waitMs: number, ready: () => boolean): Promise<boolean> | NoWait {
    let done!: (opened: boolean) => void;
    const opened = new Promise<boolean>((r) => (done = r));
    const refused = this.core.wait(id, bytes, waitMs, ready, done);
    if (refused) return refused;
    if (this.timer === undefined) {
      this.timer = setInterval(() => {
        if (this.core.tick()) return;
        clearInterval(this.timer);
        this.timer = undefined;
      }, sessionKeyCheckMs);
    }
    return opened;
  }
}
