/**
 * A log line budget: refusal floods cannot flood the log. The one way brine bounds a repeated warning: the
 * peer channel, what minions send (src/workers/req-handler/aes-funcs.ts), dropped forwards and cache-sync
 * records, full backlogs, a failing nonce journal; `what` names the source in the summary line. (The
 * reactor's "queue is full" line is Salt's, logged for the first drops and every 1000th as Salt's operators
 * grep for it: src/automation/thread.ts.)
 */
/** Logs at most `perWindow` lines per window, then one summary of what it held back. */
export class LogBudget {
  private windowStart = 0;
  private used = 0;
  private held = 0;

  constructor(
    private readonly perWindow: number,
    private readonly windowMs: number,
    private readonly log: (line: string) => void,
    private readonly what = "peer channel",
  ) {}

  line(text: string): void {
    const now = Date.now();
    if (now - this.windowStart >= this.windowMs) {
      if (this.held > 0) this.log(`${this.what}: ${this.held} more refusals/drops in the last ${this.windowMs} ms were not logged`);
      this.windowStart = now;
      this.used = 0;
      this.held = 0;
    }
    if (this.used < this.perWindow) {
      this.used++;
      this.log(text);
    } else {
      this.held++;
    }
  }
}
