/**
 * The API thread's view of the master's event bus: a connection to the bus socket in `sock_dir`
 * (`master_event_pub.ipc`, where salt-api's get_event listens too), open only while someone listens —
 * a `local` or `runner` call waiting for returns, an `/events` stream — and closed `busIdleMs` after the
 * last one left, so an idle API decodes nothing of a busy master's return flood. A waiter subscribes,
 * then awaits `ready()` before it sends its request, so no return can pass unseen. The main thread only
 * writes the bytes it already writes to every bus client (no per-event message to this thread); a
 * connection the master drops (a reader too far behind: src/main-thread/bus-backlog.ts) is re-opened while
 * anyone still listens.
 */
import { BrineError } from "../shared/errors.js";
import { EventClient } from "../lib/client/event-client.js";
import type { BusEvent } from "../shared/event-frame.js";
import { getLogger } from "../shared/log.js";

const log = getLogger("brine.api.bus");

/** Delay before reconnecting after the bus connection closed under listeners, ms. */
export const busReconnectMs = 200;
/** How long the connection stays open after its last listener left (the next call reuses it), ms. */
export const busIdleMs = 5_000;

/** What the API's clients need of the bus. */
export interface EventFeed {
  /** every bus event to `fn` until the returned function is called */
  subscribe(fn: (e: BusEvent) => void): () => void;
  /** resolves once events reach the subscribers (the connection is open) */
  ready(): Promise<void>;
}

export class BusFeed implements EventFeed {
  private client: EventClient | undefined;
  private connecting: Promise<void> | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly listeners = new Set<(e: BusEvent) => void>();
  private closed = false;

  constructor(
    private readonly sockDir: string,
    private readonly idleMs = busIdleMs,
  ) {}

  subscribe(fn: (e: BusEvent) => void): () => void {
    this.listeners.add(fn);
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    if (!this.client && !this.connecting) this.connect().catch(() => undefined); // ready() reports it
    return () => {
      if (this.listeners.delete(fn) && this.listeners.size === 0) this.scheduleIdle();
    };
  }

  ready(): Promise<void> {
    if (this.client) return Promise.resolve();
    return this.connecting ?? this.connect();
  }

  /** Whether a connection is open (tests, /stats). */
  get connected(): boolean {
    return this.client !== undefined;
  }

  get subscribers(): number {
    return this.listeners.size;
  }

  private connect(): Promise<void> {
    if (this.closed) return Promise.reject(new BrineError("API_MASTER", "the API is stopping"));
    const c = new EventClient(this.sockDir, () => {
      if (this.client === c) this.client = undefined;
      if (this.closed || this.listeners.size === 0) return;
      log.warning("event bus connection closed under listeners; reconnecting");
      setTimeout(() => {
        if (!this.client && !this.connecting && this.listeners.size) this.connect().catch((e: Error) => log.error(`event bus reconnect failed: ${e.message}`));
      }, busReconnectMs);
    });
    c.on((e) => {
      for (const l of this.listeners) l(e);
    });
    const p = c.connect().then(
      () => {
        if (this.closed) c.close();
        else this.client = c;
      },
      (e: Error) => {
        throw new BrineError("API_MASTER", `the master's event bus is not reachable: ${e.message}`);
      },
    );
    this.connecting = p.finally(() => {
      if (this.connecting === guarded) this.connecting = undefined;
    });
    const guarded = this.connecting;
    return guarded;
  }

  private scheduleIdle(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.listeners.size) return;
      this.client?.close();
      this.client = undefined;
    }, this.idleMs);
    this.idleTimer.unref();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.idleTimer);
    this.client?.close();
    this.client = undefined;
  }
}
