/**
 * The local event bus (main thread): a Unix stream socket in sock_dir, `master_event_pub.ipc`, where
 * every connected client receives every event frame (packed by the worker that fired it — the main
 * thread forwards bytes and decodes nothing). A client that stops reading is dropped once its unsent
 * backlog passes `busClientBacklogBytesMax`, so one stuck `salt` never grows the master's memory.
 */
import net from "node:net";
import { chmodSync, mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { getLogger } from "../shared/log.js";

import { EVENT_SOCKET } from "../shared/socket-names.js";

const log = getLogger("brine.eventbus");

export const busClientBacklogBytesMax = 64 * 1024 * 1024;

export class EventBusServer {
  private readonly clients = new Set<net.Socket>();
  private readonly local = new Set<(frame: Buffer) => void>();
  private server: net.Server | undefined;
  readonly path: string;

  constructor(sockDir: string) {
    this.path = path.join(sockDir, EVENT_SOCKET);
  }

  async start(): Promise<void> {
    mkdirSync(path.dirname(this.path), { recursive: true, mode: 0o750 });
    rmSync(this.path, { force: true });
    this.server = net.createServer((s) => {
      this.clients.add(s);
      s.on("close", () => this.clients.delete(s));
      s.on("error", () => s.destroy());
      s.on("data", () => undefined); // clients send nothing; ignore anything they do
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once("error", reject);
      this.server!.listen(this.path, () => resolve());
    });
    chmodSync(this.path, 0o600);
  }

  /** In-process listeners (runner threads are fed through these). */
  subscribe(fn: (frame: Buffer) => void): () => void {
    this.local.add(fn);
    return () => this.local.delete(fn);
  }

  publish(frames: Buffer[]): void {
    if (frames.length === 0) return;
    const chunk = frames.length === 1 ? frames[0]! : Buffer.concat(frames);
    for (const s of this.clients) {
      if (s.writableLength > busClientBacklogBytesMax) {
        log.warning("event bus client is not reading; dropping it");
        s.destroy();
        continue;
      }
      s.write(chunk);
    }
    for (const fn of this.local) for (const f of frames) fn(f);
  }

  async stop(): Promise<void> {
    for (const s of this.clients) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    rmSync(this.path, { force: true });
  }
}
