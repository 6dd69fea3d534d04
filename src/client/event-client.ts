/** A local client of the master's event bus (sock_dir/master_event_pub.ipc). */
import net from "node:net";
import path from "node:path";
import { EventStreamReader, type BusEvent } from "../events/event-frame.js";
import { EVENT_SOCKET } from "../events/bus-server.js";

export class EventClient {
  private sock: net.Socket | undefined;
  private readonly listeners = new Set<(e: BusEvent) => void>();

  /** `onClose`: called once when an established connection ends (not after close()) */
  constructor(
    private readonly sockDir: string,
    private readonly onClose?: () => void,
  ) {}

  async connect(): Promise<void> {
    const p = path.join(this.sockDir, EVENT_SOCKET);
    const reader = new EventStreamReader();
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
        } catch {
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
