/**
 * Waiting for a job's returns, as Salt's LocalClient.get_iter_returns does, as a pure state machine
 * (time injected): returns mark minions found; after `timeout` with minions pending it asks them
 * `saltutil.find_job`; a minion still running the job gets another `timeout`; the wait ends when
 * everyone returned, or when the deadline passed with nothing running and every pending minion's
 * own deadline gone.
 *
 * On a master of masters (`syndicWaitMs` given, Salt's order_masters + syndic_wait): the minions below
 * syndics are learned from `syndic/<syndic>/salt/job/<jid>/new` events and from their returns; the wait
 * lasts at least `syndicWaitMs` even when every minion known so far returned, and after find_job the
 * wait grows by it, as Salt's get_iter_returns does. A syndic's report may name minions its lower master does
 * not see connected (`not_connected`, a brine lower master's): `notConnectedBelow` says which of the missing
 * ones no syndic reported connected; the master's own `salt/job/<jid>/new` names the minions it did not see
 * connected when it published (`wasNotConnected`).
 */

export type WaiterAction = { type: "find_job"; minions: string[] } | { type: "done"; missing: string[] };

export interface ReturnEvent {
  id: string;
  data: Record<string, unknown>;
}

export class ReturnWaiter {
  readonly expected = new Set<string>();
  readonly found = new Set<string>();
  private readonly deadlines = new Map<string, number>();
  private readonly findJids = new Set<string>();
  private timeoutAt: number;
  private minionsRunning = true;
  private finished = false;
  /** master of masters: not done before this time (Salt's gather_syndic_wait) */
  private readonly gatherUntil: number;
  /** minions learned from a syndic's report: minion → syndic */
  readonly viaSyndic = new Map<string, string>();
  /** minions a syndic reported not connected below it, and those another syndic reported without saying so */
  private readonly reportedNotConnected = new Set<string>();
  private readonly reportedConnected = new Set<string>();
  /** this master's own minions it did not see connected when it published (its `salt/job/<jid>/new`) */
  private readonly notConnectedAtPublish = new Set<string>();

  constructor(
    readonly jid: string,
    minions: string[],
    private readonly timeoutMs: number,
    private readonly gatherJobTimeoutMs: number,
    now: number,
    private readonly syndicWaitMs?: number,
    /** ids never waited for (a master of masters' syndics: accepted keys that never run a job) */
    private readonly notMinion?: (id: string) => boolean,
  ) {
    for (const m of minions) this.expect(m, now);
    this.timeoutAt = now + timeoutMs;
    this.gatherUntil = now + (syndicWaitMs ?? 0);
  }

  private expect(id: string, now: number): void {
    if (this.notMinion?.(id)) return;
    this.expected.add(id);
    if (!this.deadlines.has(id)) this.deadlines.set(id, now + this.timeoutMs);
  }

  pending(): string[] {
    return [...this.expected].filter((m) => !this.found.has(m)).sort();
  }

  /** A minion below a syndic that no syndic reported connected (one reported it not connected). */
  notConnectedBelow(id: string): boolean {
    return this.reportedNotConnected.has(id) && !this.reportedConnected.has(id);
  }

  /** A minion of this master it did not see connected when it published the job (it never got it). */
  wasNotConnected(id: string): boolean {
    return this.notConnectedAtPublish.has(id);
  }

  /** A find_job publish was made with this jid: its returns are progress reports. */
  watchFindJob(jid: string): void {
    this.findJids.add(jid);
  }

  /** Feed a bus event; returns the minion return it carries, if it is one for this job. */
  onEvent(tag: string, data: Record<string, unknown>, now: number): ReturnEvent | undefined {
    // an event's data is whatever its sender packed (a string, null, a list): only a map can be a job event
    if (data === null || typeof data !== "object" || Array.isArray(data) || Buffer.isBuffer(data)) return undefined;
    const parts = tag.split("/");
    if (parts[0] === "syndic" && this.syndicWaitMs !== undefined) {
      // syndic/<syndic>/salt/job/<jid>/new: the minions matched below that syndic
      if (parts.length === 6 && parts[2] === "salt" && parts[3] === "job" && parts[4] === this.jid && parts[5] === "new" && Array.isArray(data.minions)) {
        const notConnected = new Set(Array.isArray(data.not_connected) ? data.not_connected : []);
        for (const m of data.minions) {
          if (typeof m !== "string") continue;
          this.expect(m, now);
          if (!this.viaSyndic.has(m)) this.viaSyndic.set(m, parts[1]!);
          (notConnected.has(m) ? this.reportedNotConnected : this.reportedConnected).add(m);
        }
      }
      return undefined;
    }
    if (parts[0] !== "salt" || parts[1] !== "job") return undefined;
    const jid = parts[2]!;
    if (jid === this.jid) {
      if (parts.length === 4 && parts[3] === "new" && Array.isArray(data.minions)) {
        for (const m of data.minions) if (typeof m === "string") this.expect(m, now);
        if (Array.isArray(data.not_connected)) for (const m of data.not_connected) if (typeof m === "string") this.notConnectedAtPublish.add(m);
      }
      if (parts[3] === "ret" && parts.length >= 5 && "return" in data) {
        const id = parts.slice(4).join("/");
        if (this.found.has(id)) return undefined;
        this.expect(id, now);
        this.found.add(id);
        return { id, data };
      }
      return undefined;
    }
    if (this.findJids.has(jid) && parts[3] === "ret" && parts.length >= 5) {
      const id = parts.slice(4).join("/");
      const ret = data.return;
      if (typeof data.retcode === "number" && data.retcode > 0) {
        this.expected.delete(id);
      } else if (ret && typeof ret === "object" && !Array.isArray(ret) && Object.keys(ret).length > 0) {
        this.minionsRunning = true;
        this.deadlines.set(id, now + this.timeoutMs);
      }
    }
    return undefined;
  }

  /** Advance time; at most one action per call. */
  tick(now: number): WaiterAction | undefined {
    if (this.finished) return undefined;
    const pending = this.pending();
    if (pending.length === 0) {
      if (now < this.gatherUntil) return undefined;
      this.finished = true;
      return { type: "done", missing: [] };
    }
    if (now > this.timeoutAt && this.minionsRunning) {
      this.minionsRunning = false;
      this.timeoutAt = now + this.gatherJobTimeoutMs + (this.syndicWaitMs ?? 0);
      return { type: "find_job", minions: pending };
    }
    if (now > this.timeoutAt && !this.minionsRunning && pending.every((m) => (this.deadlines.get(m) ?? 0) < now)) {
      this.finished = true;
      return { type: "done", missing: pending };
    }
    return undefined;
  }

  get done(): boolean {
    return this.finished;
  }
}
