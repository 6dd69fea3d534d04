/**
 * A progress bar on a terminal (cli-progress, on stderr); nothing at all when stderr is not a TTY, so
 * piped and scripted runs stay machine-readable.
 */
import cliProgress from "cli-progress";

export class Progress {
  private bar: cliProgress.SingleBar | undefined;
  private total = 0;
  private t0 = Date.now();

  constructor(readonly enabled: boolean = !!process.stderr.isTTY) {}

  phase(name: string, total: number): void {
    if (!this.enabled) return;
    this.stop();
    this.total = total;
    this.t0 = Date.now();
    this.bar = new cliProgress.SingleBar(
      {
        format: `${name.padEnd(8)} |{bar}| {value}/{total} {rate}/s {extra}`,
        hideCursor: true,
        clearOnComplete: false,
        stream: process.stderr,
        fps: 5,
      },
      cliProgress.Presets.shades_classic,
    );
    this.bar.start(total, 0, { rate: "0", extra: "" });
  }

  update(value: number, extra = ""): void {
    if (!this.bar) return;
    const secs = (Date.now() - this.t0) / 1000;
    this.bar.update(Math.min(value, this.total), { rate: secs > 0 ? (value / secs).toFixed(0) : "0", extra });
  }

  stop(): void {
    this.bar?.stop();
    this.bar = undefined;
  }
}
