/**
 * The readiness file `cachedir/health/ready` (beyond Salt, for orchestrators such as Kubernetes: an exec
 * probe `test -f`): present only while this master is ready by src/shared/cluster-health.ts's rule (single
 * master: serving; clustered: a caught-up voter or a learner in sync), removed as soon as a check finds it is
 * not, and at stop. One coarse timer on the main thread (`readinessTickMs`); the decision is the pure
 * `readiness()`, this shell only gathers its facts and writes or removes the file (temporary file, then
 * rename), logging each change once.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { getLogger } from "../shared/log.js";
import { readiness, type ReadinessFacts } from "../shared/cluster-health.js";

const log = getLogger("brine.readiness");

/** How often the file is brought up to date. */
export const readinessTickMs = 1000;

export function readinessFile(cachedir: string): string {
  return path.join(cachedir, "health", "ready");
}

export class ReadinessFile {
  private timer: NodeJS.Timeout | undefined;
  private ready: boolean | undefined;
  private checking = false;
  readonly file: string;

  constructor(
    cachedir: string,
    /** the facts of the moment (the Raft worker's status when clustered) */
    private readonly facts: () => Promise<ReadinessFacts>,
  ) {
    this.file = readinessFile(cachedir);
  }

  /** Removes a file a previous run left, checks once, then every readinessTickMs. */
  async start(): Promise<void> {
    rmSync(this.file, { force: true });
    await this.check();
    this.timer = setInterval(() => void this.check(), readinessTickMs);
    this.timer.unref();
  }

  /** Stops the checks and removes the file (a stopping master is not ready). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.set(false, "stopping");
  }

  async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      let r;
      try {
        r = readiness(await this.facts());
      } catch (e) {
        r = { ready: false, reason: `status unavailable: ${(e as Error).message}` };
      }
      if (this.timer !== undefined || this.ready === undefined) this.set(r.ready, r.reason);
    } finally {
      this.checking = false;
    }
  }

  private set(ready: boolean, reason: string): void {
    if (ready === this.ready) return;
    try {
      if (ready) {
        mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o755 });
        const tmp = `${this.file}.${process.pid}.tmp`;
        writeFileSync(tmp, `${new Date().toISOString()} ${reason}\n`, { mode: 0o644 });
        renameSync(tmp, this.file);
      } else {
        rmSync(this.file, { force: true });
      }
      this.ready = ready;
      log.info(`readiness: ${ready ? "ready" : "not ready"} (${reason}); ${this.file} ${ready ? "written" : "removed"}`);
    } catch (e) {
      log.error(`readiness: ${this.file} could not be ${ready ? "written" : "removed"}: ${(e as Error).message}`);
    }
  }
}
