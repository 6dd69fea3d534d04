/** Main-thread handle on the publisher thread: loads in, frames out, in order. */
import { Worker } from "node:worker_threads";
import type { PublisherInit, PublisherReply, PublisherRequest } from "../workers/publisher/messages.js";

export class PublisherClient {
  private readonly worker: Worker;
  private seq = 0;

  constructor(init: PublisherInit, onFrames: (frames: Buffer[]) => void) {
    this.worker = new Worker(new URL("../workers/publisher/worker.js", import.meta.url), { workerData: init });
    this.worker.on("message", (r: PublisherReply) => onFrames(r.frames.map((f) => Buffer.from(f.buffer, f.byteOffset, f.byteLength))));
    this.worker.on("error", (e) => {
      throw e;
    });
  }

  publish(loads: Record<string, unknown>[]): void {
    if (loads.length === 0) return;
    const req: PublisherRequest = { seq: ++this.seq, loads };
    this.worker.postMessage(req);
  }

  async stop(): Promise<void> {
    await this.worker.terminate();
  }
}
