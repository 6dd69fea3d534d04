/**
 * The publish port (`publish_port`, 4505): a ZeroMQ PUB socket fed by the publisher thread. Publish loads
 * go to the publisher (src/workers/publisher/: serial, AES, signature, in arrival order); the frames it
 * returns are sent as single-part messages, in order, through one send queue.
 */
import path from "node:path";
import { Context, Publisher } from "zeromq";
import type { MasterConfig } from "../shared/config/defaults.js";
import { minionFacingKeyFiles } from "../shared/shared-fs.js";
import { PublisherClient } from "./publisher-client.js";
import { SendQueue } from "./send-queue.js";
import { setBatchSizes } from "./zmq-memory.js";
import { threadLogSettings } from "../shared/thread-kit.js";

/**
 * ZeroMQ I/O threads of the publish socket's own context. libzmq gives each subscriber's TCP connection to one
 * I/O thread and a publish is one write per subscriber, so the last of N subscribers has the frame after
 * N writes spread over these threads (bench/publish-fanout.ts).
 */
export const publishIoThreads = 1;

export class PublishPort {
  private readonly pub: Publisher;
  readonly out: SendQueue;
  private readonly publisher: PublisherClient;

  constructor(cfg: MasterConfig, secrets: SharedArrayBuffer, ioThreads = publishIoThreads) {
    const context = ioThreads === 1 ? undefined : new Context({ ioThreads, blocky: false });
    this.pub = new Publisher({ ...(context ? { context } : {}), sendHighWaterMark: cfg.pub_hwm, backlog: cfg.zmq_backlog, linger: 0, tcpKeepalive: 1, tcpKeepaliveIdle: 300, ipv6: cfg.ipv6 });
    setBatchSizes(this.pub, cfg.brine_zmq_batch_bytes);
    this.out = new SendQueue((m) => this.pub.send(m), "publish");
    const key = minionFacingKeyFiles(cfg).pem;
    this.publisher = new PublisherClient(
      {
        secrets,
        pkiDir: path.dirname(key),
        keyName: path.basename(key, ".pem"),
        signPubMessages: cfg.sign_pub_messages,
        signingAlgorithm: cfg.publish_signing_algorithm,
        clustered: Boolean(cfg.cluster_id),
        log: threadLogSettings(),
      },
      (frames) => frames.forEach((f) => this.out.push([f])),
    );
  }

  async bind(endpoint: string): Promise<void> {
    await this.pub.bind(endpoint);
  }

  /** Loads to encrypt, sign and send, in this order. */
  publish(loads: Record<string, unknown>[]): void {
    this.publisher.publish(loads);
  }

  async drained(): Promise<void> {
    await this.out.drained();
  }

  /** Closes the socket, then stops the publisher thread. */
  async close(): Promise<void> {
    this.pub.close();
    await this.publisher.stop();
  }
}
