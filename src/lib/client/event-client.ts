/**
 * A local client of the master's event bus (sock_dir/master_event_pub.ipc). Any bytes in a tag or in data
 * leave it reading (an event it cannot decode is skipped); only a stream that is not Salt's event framing at
 * all ends it: the socket is closed and a warning logged, never an exception out of a socket callback.
 */
import net from "node:net";
import path from "node:path";
import { EventStreamReader, type BusEvent } from "../../shared/event-frame.js";
import { EVENT_SOCKET } from "../../shared/socket-names.js";
import { getLogger } from "../../shared/log.js";

const log = getLogger("brine.eventclient");

export class EventClient {
  private sock: net.Socket | undefined;
  private readonly listeners = new Set<(e: BusEvent) => void>();
  /** events skipped (undecodable) on earlier connections */
  private skippedBefore = 0;
  private reader: EventStreamReader | undefined;

  /** `onClose`: called once when an established connection ends (not after close()) */
  constructor(
    private readonly sockDir: string,
    private readonly onClose?: () => void,
  ) {}

  /** events skipped because they could not be decoded */
  get skipped(): number {
    return this.skippedBefore + (this.reader?.skipped ?? 0);
  }

  async connect(): Promise<void> {
    const p = path.join(this.sockDir, EVENT_SOCKET);
    this.skippedBefore += this.reader?.skipped ?? 0;
    const reader = (this.reader = new EventStreamReader());
    await new Promise<void>((resolve, reject) => {
      let established = false;
      const s = net.connect(p, () => {
        established = true;
        resolve();
      });
      s.once("error", reject);
      s.once("close", () => {
        if (established && !this.closing) this.onClose?.();
      });
      s.on("data", (chunk) => {
        let events: BusEvent[];
        try {
          events = reader.push(chunk);
        } catch (e) {
          log.warning(`the event bus sent bytes that are not events (${(e as Error).message}); closing it`);
          s.destroy(); // a stream we cannot frame any more: drop it (onClose reconnects)
          return;
        }
        for (const ev of events) for (const l of this.listeners) l(ev);
      });
      this.sock = s;
    });
  }

  on(fn: (e: BusEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private closing = false;

  close(): void {
    this.closing = true;
    this.sock?.destroy();
  }
}
