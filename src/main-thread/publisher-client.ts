/** Main-thread handle on the publisher thread: loads in, frames out, in order. */
import type { Worker } from "node:worker_threads";
import type { PublisherInit, PublisherReply, PublisherRequest } from "../workers/publisher/messages.js";
import { spawnThread } from "../shared/thread-kit.js";

export class PublisherClient {
  private readonly worker: Worker;

  constructor(init: PublisherInit, onFrames: (frames: Buffer[]) => void) {
    // policy: an error ends the process (rethrown here): a master that cannot publish must not keep serving
    this.worker = spawnThread({
      name: "publisher",
      url: new URL("../workers/publisher/worker.js", import.meta.url),
      workerData: init,
      onError: (e) => {
        throw e;
      },
    });
    this.worker.on("message", (r: PublisherReply) => onFrames(r.frames.map((f) => Buffer.from(f.buffer, f.byteOffset, f.byteLength))));
  }

  publish(loads: Record<string, unknown>[]): void {
    if (loads.length === 0) return;
    const req: PublisherRequest = { k: "pub", loads };
    this.worker.postMessage(req);
  }

  async stop(): Promise<void> {
    // terminated directly: the publisher loads no zeromq (an import rule), so it holds no socket endThread would close
    await this.worker.terminate();
  }
}
