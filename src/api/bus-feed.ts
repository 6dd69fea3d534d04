/**
 * The API thread's view of the master's event bus: one connection to the bus socket in `sock_dir`
 * (`master_event_pub.ipc`, where salt-api's get_event listens too), kept for the thread's life and
 * re-opened if the master drops it (a reader over `busClientBacklogBytesMax` behind is dropped). The
 * `local` and `runner` clients and every `/events` stream subscribe here; the main thread only writes
 * the bytes it already writes to every bus client (no per-event message to this thread).
 */
import { EventClient } from "../client/event-client.js";
import type { BusEvent } from "../events/event-frame.js";
import { getLogger } from "../log.js";

const log = getLogger("brine.api.bus");

/** Delay before reconnecting after the bus connection closed, ms. */
export const busReconnectMs = 200;

export class BusFeed {
  private client: EventClient | undefined;
  private readonly listeners = new Set<(e: BusEvent) => void>();
  private closed = false;

  constructor(private readonly sockDir: string) {}

  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    const c = new EventClient(this.sockDir, () => {
      if (this.closed) return;
      log.warning("event bus connection closed; reconnecting");
      setTimeout(() => void this.connect().catch((e: Error) => log.error(`event bus reconnect failed: ${e.message}`)), busReconnectMs);
    });
    await c.connect();
    c.on((e) => {
      for (const l of this.listeners) l(e);
    });
    this.client = c;
  }

  subscribe(fn: (e: BusEvent) => void): () => void {
    this.listeners.add(fn);
    return () => void this.listeners.delete(fn);
  }

  get subscribers(): number {
    return this.listeners.size;
  }

  close(): void {
    this.closed = true;
    this.client?.close();
  }
}
