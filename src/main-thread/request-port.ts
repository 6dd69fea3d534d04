/**
 * The request port (`ret_port`, 4506): a ZeroMQ ROUTER. Each message is identity frames + the request
 * body; the body goes to the request lanes with the identity frames as its tag, and the reply goes back
 * with them. No decoding here: a stopping master answers SHUTDOWN_REPLY, a full lane QUEUE_FULL_REPLY,
 * both at once, so every request gets exactly one reply.
 */
import { Router } from "zeromq";
import type { MasterConfig } from "../shared/config/defaults.js";
import { getLogger } from "../shared/log.js";
import { SendQueue } from "./send-queue.js";
import { setBatchSizes } from "./zmq-memory.js";
import { QUEUE_FULL_REPLY, SHUTDOWN_REPLY } from "./req-pool.js";

const log = getLogger("brine.master");

/** identity + delimiter frames, echoed back with the reply */
export type RouterTag = Buffer[];

export class RequestPort {
  private readonly router: Router;
  readonly out: SendQueue;
  private closed = false;

  constructor(
    cfg: MasterConfig,
    /** false when the lane is full */
    private readonly submit: (body: Buffer, tag: RouterTag) => boolean,
    private readonly stopping: () => boolean,
  ) {
    this.router = new Router({ backlog: cfg.zmq_backlog, linger: 0, ipv6: cfg.ipv6, mandatory: false });
    setBatchSizes(this.router, cfg.brine_zmq_batch_bytes);
    this.out = new SendQueue((m) => this.router.send(m), "router");
  }

  async bind(endpoint: string): Promise<void> {
    await this.router.bind(endpoint);
  }

  reply(tag: RouterTag, reply: Buffer): void {
    this.out.push([...tag, reply]);
  }

  /** Reads requests until close(). */
  async run(): Promise<void> {
    try {
      for await (const frames of this.router) {
        if (frames.length < 2) continue; // an identity with no body: nothing to answer
        const body = frames[frames.length - 1]!;
        const tag = frames.slice(0, -1);
        if (this.stopping()) {
          this.reply(tag, SHUTDOWN_REPLY);
          continue;
        }
        if (!this.submit(body, tag)) {
          log.warning("request lane full; answering retry-later");
          this.reply(tag, QUEUE_FULL_REPLY);
        }
      }
    } catch (e) {
      if (!this.closed) log.error(`request socket failed: ${(e as Error).message}`);
    }
  }

  async drained(): Promise<void> {
    await this.out.drained();
  }

  close(): void {
    this.closed = true;
    this.router.close();
  }
}
