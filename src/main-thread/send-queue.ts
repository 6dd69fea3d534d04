/**
 * zeromq.js allows one send in flight per socket; this queue serializes sends without making callers
 * wait. A send that fails (e.g. the peer is gone and ROUTER_MANDATORY is off, or HWM) is logged and
 * dropped — for replies that is what a vanished REQ peer means.
 */
import { getLogger } from "../shared/log.js";

const log = getLogger("brine.transport");

/** Messages queued before new ones are refused (memory bound when a socket stalls). */
export const sendQueueLenMax = 200_000;

/** What the ports send through: this queue (libzmq) or the native transport's sockets (zmtp-server.ts). */
export interface Outbox {
  push(msg: Buffer[]): void;
  /** messages waiting */
  readonly length: number;
  /** messages sent since start */
  readonly sent: number;
  /** messages dropped since start */
  readonly dropped: number;
  drained(): Promise<void>;
}

export class SendQueue implements Outbox {
  private q: Buffer[][] = [];
  private running = false;
  private idle: (() => void)[] = [];
  /** messages the socket took since start (the metrics board) */
  sent = 0;
  /** messages dropped since start: the queue was full, or the socket refused the send (the metrics board) */
  dropped = 0;

  constructor(
    private readonly send: (m: Buffer[]) => Promise<void>,
    private readonly name: string,
  ) {}

  push(msg: Buffer[]): void {
    if (this.q.length >= sendQueueLenMax) {
      log.error(`${this.name} send queue full; dropping a message`);
      this.dropped++;
      return;
    }
    this.q.push(msg);
    if (!this.running) void this.pump();
  }

  private async pump(): Promise<void> {
    this.running = true;
    while (this.q.length) {
      const m = this.q.shift()!;
      try {
        await this.send(m);
        this.sent++;
      } catch (e) {
        log.debug(`${this.name} send failed: ${(e as Error).message}`);
        this.dropped++;
      }
    }
    this.running = false;
    for (const f of this.idle.splice(0)) f();
  }

  /** messages waiting */
  get length(): number {
    return this.q.length;
  }

  drained(): Promise<void> {
    return this.running ? new Promise((r) => this.idle.push(r)) : Promise.resolve();
  }
}
