/**
 * The publish port (`publish_port`, 4505): a PUB socket fed by the publisher thread, served by libzmq
 * (zeromq.js) or, with `brine_minion_transport: native`, by brine's own ZMTP server (zmtp-server.ts). Publish
 * loads go to the publisher (src/workers/publisher/: serial, AES, signature, in arrival order); the frames it
 * returns are sent as single-part messages, in order. Clustered, the frames of this master's own publishes also go
 * to `sealed` (for the peers), and a peer's forwarded publishes come in through `forwarded`.
 */
import path from "node:path";
import { Context, Publisher } from "zeromq";
import { masterDefaults, type MasterConfig } from "../shared/config/defaults.js";
import { getLogger } from "../shared/log.js";
import { minionFacingKeyFiles } from "../shared/shared-fs.js";
import { PublisherClient } from "./publisher-client.js";
import type { PublisherCounts } from "../workers/publisher/messages.js";
import { SendQueue, type Outbox } from "./send-queue.js";
import { setBatchSizes } from "./zmq-memory.js";
import { NativePublisher, type SubscriberWatcher } from "./zmtp-server.js";
import { threadLogSettings } from "../shared/thread-kit.js";

const log = getLogger("brine.transport");

/**
 * ZeroMQ I/O threads of the publish socket's own context. libzmq gives each subscriber's TCP connection to one
 * I/O thread and a publish is one write per subscriber, so the last of N subscribers has the frame after
 * N writes spread over these threads (bench/publish-fanout.ts).
 */
export const publishIoThreads = 1;
/** TCP keepalive idle time of subscribers' connections, ms (the libzmq PUB's tcpKeepaliveIdle: 300 s) */
const keepaliveIdleMs = 300_000;

export class PublishPort {
  private readonly pub: Publisher | undefined;
  private readonly native: NativePublisher | undefined;
  readonly out: Outbox;
  private readonly publisher: PublisherClient;

  /** `sealed`: clustered, where this master's own sealed publishes go (the peers; see PublisherOutput) */
  constructor(cfg: MasterConfig, secrets: SharedArrayBuffer, sealed?: (loads: Uint8Array, frames: Uint8Array[]) => void, ioThreads = publishIoThreads) {
    if (cfg.brine_minion_transport === "native") {
      // libzmq's own option: said once at start (the publish port is made once), never silently ignored
      if (cfg.brine_zmq_batch_bytes !== masterDefaults().brine_zmq_batch_bytes) log.warning(`brine_zmq_batch_bytes (${cfg.brine_zmq_batch_bytes}) is not implemented with brine_minion_transport: native (it sizes libzmq's buffers); ignored`);
      this.native = new NativePublisher({ backlog: cfg.zmq_backlog, keepaliveIdleMs, ipv6: cfg.ipv6 }, cfg.pub_hwm);
      this.out = this.native;
    } else {
      const context = ioThreads === 1 ? undefined : new Context({ ioThreads, blocky: false });
      const pub = new Publisher({ ...(context ? { context } : {}), sendHighWaterMark: cfg.pub_hwm, backlog: cfg.zmq_backlog, linger: 0, tcpKeepalive: 1, tcpKeepaliveIdle: keepaliveIdleMs / 1000, ipv6: cfg.ipv6 });
      setBatchSizes(pub, cfg.brine_zmq_batch_bytes);
      this.pub = pub;
      this.out = new SendQueue((m) => pub.send(m), "publish");
    }
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
      { frames: (frames) => frames.forEach((f) => this.out.push([f])), ...(sealed ? { sealed } : {}) },
    );
  }

  async bind(endpoint: string): Promise<void> {
    await (this.native ?? this.pub)!.bind(endpoint);
  }

  /** Loads to encrypt, sign and send, in this order. */
  publish(loads: Record<string, unknown>[]): void {
    this.publisher.publish(loads);
  }

  /** A peer's forwarded publishes (the msgpack of its loads, and its sealed frames if it sent them): to this port only. */
  forwarded(from: string, loads: Uint8Array, frames?: Uint8Array[]): void {
    this.publisher.forwarded(from, loads, frames);
  }

  /** what the publisher thread has sealed, signed, sent as a peer sealed it, refused (as of its last reply) */
  get publisherCounts(): PublisherCounts {
    return this.publisher.counts;
  }

  /**
   * Remote addresses of the connected subscribers, with the native transport (it knows its connections);
   * undefined with libzmq, whose connections only /proc/net/tcp shows (src/workers/req-handler/presence.ts).
   */
  subscriberAddresses(): string[] | undefined {
    return this.native?.remoteAddresses();
  }

  /**
   * With the native transport, tells `watcher` of each subscriber as it comes and goes (true); libzmq's
   * connections only /proc/net/tcp shows (false).
   */
  watchSubscribers(watcher: SubscriberWatcher): boolean {
    this.native?.watch(watcher);
    return this.native !== undefined;
  }

  async drained(): Promise<void> {
    await this.out.drained();
  }

  /** Closes the socket, then stops the publisher thread. */
  /** connections closed for not finishing their ZMTP handshake in time (native transport; libzmq does not say) */
  get handshakeTimeouts(): number {
    return this.native?.handshakeTimeouts ?? 0;
  }

  async close(): Promise<void> {
    this.pub?.close();
    this.native?.close();
    await this.publisher.stop();
  }
}
