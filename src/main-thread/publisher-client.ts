/** Main-thread handle on the publisher thread: publishes in, frames out, in order. */
import type { Worker } from "node:worker_threads";
import type { PublisherCounts, PublisherForwarded, PublisherInit, PublisherReply, PublisherRequest } from "../workers/publisher/messages.js";
import { spawnThread, terminateThread } from "../shared/thread-kit.js";

/** Where the publisher thread's output goes: every frame to the PUB socket; clustered, own publishes also to the peers. */
export interface PublisherOutput {
  frames(frames: Buffer[]): void;
  /** this master's own publishes, sealed: the msgpack of their loads and their frames (one per load), for the peers */
  sealed?(loads: Uint8Array, frames: Uint8Array[]): void;
}

export class PublisherClient {
  private readonly worker: Worker;
  /** the publisher thread's totals as of its last reply */
  counts: PublisherCounts = { sealed: 0, signed: 0, passed: 0, refused: 0, dropped: 0 };

  constructor(init: PublisherInit, out: PublisherOutput) {
    // policy: an error ends the process (rethrown here): a master that cannot publish must not keep serving
    this.worker = spawnThread({
      name: "publisher",
      url: new URL("../workers/publisher/worker.js", import.meta.url),
      workerData: init,
      onError: (e) => {
        throw e;
      },
    });
    this.worker.on("message", (r: PublisherReply) => {
      this.counts = r.counts;
      out.frames(r.frames.map((f) => Buffer.from(f.buffer, f.byteOffset, f.byteLength)));
      if (r.forward && r.frames.length > 0) out.sealed?.(r.forward, r.frames);
    });
  }

  publish(loads: Record<string, unknown>[]): void {
    if (loads.length === 0) return;
    const req: PublisherRequest = { k: "pub", loads };
    this.worker.postMessage(req);
  }

  /** A peer's forwarded publishes (PublisherForwarded): sent to this master's subscribers only. */
  forwarded(from: string, loads: Uint8Array, frames?: Uint8Array[]): void {
    const req: PublisherForwarded = { k: "fwd", from, loads, ...(frames ? { frames } : {}) };
    this.worker.postMessage(req);
  }

  async stop(): Promise<void> {
    // terminated directly: the publisher loads no zeromq (an import rule), so it holds no socket endThread would close
    await terminateThread(this.worker, "publisher");
  }
}
