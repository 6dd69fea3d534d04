/**
 * Periodic work of the main thread, on one coarse timer (never a timer per minion or per job):
 * AES rotation when the drop file `cachedir/.dfn` appears (salt-key delete writes it), job cache
 * cleanup every `loop_interval`, the nonce set's generation swap, and the gitfs / git_pillar updates
 * (src/lib/fileserver/git-cache.ts: each remote when its update interval is due, the first right at start).
 */
import { existsSync, readFileSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { getLogger } from "../shared/log.js";
import { replayWindowMs } from "../workers/req-handler/replay-window.js";

const log = getLogger("brine.maintenance");

/** The timer's period: the drop file is noticed within this. */
export const maintenanceTickMs = 1000;
/** How long a request nonce is remembered (between one and two of these; why this long: replay-window.ts). */
export const nonceWindowMs = replayWindowMs;
/** Clustered: a drop file naming another master is left for it this long, then removed as stale. */
export const foreignDropFileAgeMsMax = 60_000;

export interface MaintenanceHooks {
  rotate(): void;
  cleanup(): Promise<void>;
  rotateNonces(): void;
  /** presence_events: fire salt/presence/present and /change (called every loop_interval) */
  presence?(): Promise<void>;
  /** gitfs / git_pillar: start the updates that are due (returns at once; one update runs at a time) */
  gitUpdate?(now: number): void;
}

export class Maintenance {
  private timer: NodeJS.Timeout | undefined;
  private lastCleanup = 0;
  private lastNonceSwap = Date.now();
  private cleaning = false;

  constructor(
    private readonly cachedir: string,
    private readonly masterId: string,
    private readonly loopIntervalS: number,
    private readonly rotateAesKey: boolean,
    private readonly hooks: MaintenanceHooks,
    /** clustered (cachedir may be shared): leave a drop file naming another master to that master */
    private readonly clustered = false,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.tick(Date.now()), maintenanceTickMs);
    this.timer.unref();
    this.hooks.gitUpdate?.(Date.now());
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  tick(now: number): void {
    const dfn = path.join(this.cachedir, ".dfn");
    if (existsSync(dfn)) {
      let owner = "";
      try {
        owner = readFileSync(dfn, "utf8").trim();
      } catch {
        // unreadable: treat as a request for this master
      }
      if (this.clustered && owner !== "" && owner !== this.masterId) {
        // another master's drop file in a shared cachedir: it rotates, and its rotation reaches every master
        let age = 0;
        try {
          age = now - statSync(dfn).mtimeMs;
        } catch {
          // gone meanwhile
        }
        if (age < foreignDropFileAgeMsMax) return this.periodic(now);
      }
      rmSync(dfn, { force: true });
      // 3007 writes the master id into the drop file; an empty one (3006 style) is for any master
      if (this.rotateAesKey && (owner === "" || owner === this.masterId)) {
        log.info("Rotating master AES key");
        this.hooks.rotate();
      }
    }
    this.periodic(now);
  }

  private periodic(now: number): void {
    this.hooks.gitUpdate?.(now);
    if (now - this.lastNonceSwap >= nonceWindowMs) {
      this.lastNonceSwap = now;
      this.hooks.rotateNonces();
    }
    if (!this.cleaning && now - this.lastCleanup >= this.loopIntervalS * 1000) {
      this.lastCleanup = now;
      this.cleaning = true;
      const presence = this.hooks.presence?.().catch((e) => log.error(`presence check failed: ${(e as Error).message}`));
      this.hooks
        .cleanup()
        .catch((e) => log.error(`job cache cleanup failed: ${(e as Error).message}`))
        .then(() => presence)
        .finally(() => (this.cleaning = false));
    }
  }
}
