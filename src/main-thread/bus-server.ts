/**
 * The local event bus (main thread): a Unix stream socket in sock_dir, `master_event_pub.ipc`, where
 * every connected client receives every event frame (packed by the worker that fired it — the main
 * thread forwards bytes and decodes nothing). Each client's unsent events are bounded as Salt's event
 * publisher bounds them (bus-backlog.ts): past `pub_server_write_queue_size` events, or an event older than
 * `publish_drain_timeout`, or `busClientBacklogBytesMax` bytes, the client is disconnected, counted by reason
 * and logged (one line per 10 s at most), so one stuck `salt` never grows the master's memory nor holds up the
 * other readers. Every client is written the same Buffer for a publish (no copy per client), so the clients'
 * backlogs share their bytes: eight stuck clients hold what the furthest behind holds, not eight times that.
 * The bounds are checked when the bus publishes (a client is never overdue while nothing is published).
 */
import net from "node:net";
import { chmodSync, mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { getLogger } from "../shared/log.js";
import { LogBudget } from "../shared/log-budget.js";
import { EVENT_SOCKET } from "../shared/socket-names.js";
import { optionDefault } from "../shared/config/options.js";
import { BUS_DROP_REASONS, SubscriberBacklog, type BusBacklogLimits, type BusDropReason } from "./bus-backlog.js";

const log = getLogger("brine.eventbus");
const dropLog = new LogBudget(1, 10_000, (line) => log.warning(line), "event bus");

/** Bytes held for one client before it is dropped, whatever its count of events (one event can be megabytes). */
export const busClientBacklogBytesMax = 64 * 1024 * 1024;

/** The bounds of a client's backlog, from the master's options. */
export function busLimits(cfg: { pub_server_write_queue_size: number; publish_drain_timeout: number }): BusBacklogLimits {
  return { queueSize: cfg.pub_server_write_queue_size, drainTimeoutMs: cfg.publish_drain_timeout * 1000, backlogBytesMax: busClientBacklogBytesMax };
}

interface Client {
  s: net.Socket;
  backlog: SubscriberBacklog;
}

export class EventBusServer {
  private readonly clients = new Set<Client>();
  private readonly local = new Set<(frame: Buffer) => void>();
  private server: net.Server | undefined;
  readonly path: string;
  /** clients disconnected for not reading, by reason, since start (the metrics board) */
  readonly dropped: Record<BusDropReason, number> = Object.fromEntries(BUS_DROP_REASONS.map((r) => [r, 0])) as Record<BusDropReason, number>;
  /** events published since start */
  events = 0;

  constructor(
    sockDir: string,
    private readonly limits: BusBacklogLimits = busLimits({ pub_server_write_queue_size: optionDefault("pub_server_write_queue_size") as number, publish_drain_timeout: optionDefault("publish_drain_timeout") as number }),
    private readonly now: () => number = Date.now,
  ) {
    this.path = path.join(sockDir, EVENT_SOCKET);
  }

  async start(): Promise<void> {
    mkdirSync(path.dirname(this.path), { recursive: true, mode: 0o750 });
    rmSync(this.path, { force: true });
    this.server = net.createServer((s) => {
      const c: Client = { s, backlog: new SubscriberBacklog(this.limits) };
      this.clients.add(c);
      s.on("close", () => this.clients.delete(c));
      s.on("error", () => s.destroy());
      s.on("data", () => undefined); // clients send nothing; ignore anything they do
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once("error", reject);
      this.server!.listen(this.path, () => resolve());
    });
    chmodSync(this.path, 0o600);
  }

  /** Clients connected now. */
  get subscribers(): number {
    return this.clients.size;
  }

  /** In-process listeners (runner threads are fed through these). */
  subscribe(fn: (frame: Buffer) => void): () => void {
    this.local.add(fn);
    return () => this.local.delete(fn);
  }

  publish(frames: Buffer[]): void {
    if (frames.length === 0) return;
    this.events += frames.length;
    const chunk = frames.length === 1 ? frames[0]! : Buffer.concat(frames);
    const sizes = frames.map((f) => f.length);
    const now = this.now();
    for (const c of this.clients) {
      if (c.s.destroyed) continue;
      c.s.write(chunk);
      const why = c.backlog.wrote(sizes, c.s.writableLength, now);
      if (why) this.drop(c, why);
    }
    for (const fn of this.local) for (const f of frames) fn(f);
  }

  private drop(c: Client, why: BusDropReason): void {
    this.dropped[why]++;
    const total = BUS_DROP_REASONS.reduce((n, r) => n + this.dropped[r], 0);
    const detail =
      why === "queue_full"
        ? `more than ${this.limits.queueSize} events unsent (pub_server_write_queue_size)`
        : why === "drain_timeout"
          ? `an event unsent for over ${this.limits.drainTimeoutMs / 1000} s (publish_drain_timeout)`
          : `over ${this.limits.backlogBytesMax} bytes unsent`;
    dropLog.line(`event bus client is not reading (${detail}); disconnected it (${total} so far)`);
    this.clients.delete(c);
    c.s.destroy();
  }

  async stop(): Promise<void> {
    for (const c of this.clients) c.s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    rmSync(this.path, { force: true });
  }
}
