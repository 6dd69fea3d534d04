/** A local client of the master's event bus (sock_dir/master_event_pub.ipc). */
import net from "node:net";
import path from "node:path";
import { EventStreamReader, type BusEvent } from "../events/event-frame.js";
import { EVENT_SOCKET } from "../events/bus-server.js";

export class EventClient {
  private sock: net.Socket | undefined;
  private readonly listeners = new Set<(e: BusEvent) => void>();

  constructor(private readonly sockDir: string) {}

  async connect(): Promise<void> {
    const p = path.join(this.sockDir, EVENT_SOCKET);
    const reader = new EventStreamReader();
    await new Promise<void>((resolve, reject) => {
      const s = net.connect(p, () => resolve());
      s.once("error", reject);
      s.on("data", (chunk) => {
        for (const ev of reader.push(chunk)) for (const l of this.listeners) l(ev);
      });
      this.sock = s;
    });
  }

  on(fn: (e: BusEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  close(): void {
    this.sock?.destroy();
  }
}
