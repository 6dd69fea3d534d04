/**
 * The request port (`ret_port`, 4506): a ROUTER, served by libzmq (zeromq.js) or, with
 * `brine_minion_transport: native`, by brine's own ZMTP server (zmtp-server.ts). Each message is identity frames
 * + the request body; the body goes to the request lanes with the identity frames as its tag, and the reply goes
 * back with them. No decoding here: a stopping master answers a clear request SHUTDOWN_REPLY, a full lane's clear
 * request QUEUE_FULL_REPLY, both at once. An AES request (a minion's return, pillar, file or mine request) refused
 * for the same reasons gets no reply: a Salt minion cannot read a map as the reply to an AES request (its
 * Crypticle.loads raises TypeError, which salt/channel/client.py's send() retries at once, `return_retry_tries` times,
 * and the minion then drops the return), while silence is what an overloaded or stopping Salt master gives: the
 * minion's try times out (60 s for a return) and it sends again, on a new connection (through a balancer, maybe to
 * another master).
 */
import { Router } from "zeromq";
import type { MasterConfig } from "../shared/config/defaults.js";
import { getLogger } from "../shared/log.js";
import { SendQueue, type Outbox } from "./send-queue.js";
import { setBatchSizes } from "./zmq-memory.js";
import { NativeRouter } from "./zmtp-server.js";
import { classify, QUEUE_FULL_REPLY, SHUTDOWN_REPLY } from "./req-pool.js";
import { TOO_LARGE_REPLY } from "../workers/req-handler/replies.js";
import { LogBudget } from "../shared/log-budget.js";
import type { ConnBoard } from "../shared/conn-board.js";
import { SignInReplies, signInReplyRememberMs } from "./sign-in-replies.js";

const log = getLogger("brine.master");

/** identity + delimiter frames, echoed back with the reply */
export type RouterTag = Buffer[];

export class RequestPort {
  private readonly router: Router | undefined;
  private readonly native: NativeRouter | undefined;
  readonly out: Outbox;
  private closed = false;
  /** lines about requests over frameBytesMax (native transport), per minute */
  private readonly tooLarge = new LogBudget(10, 60_000, (l) => log.warning(l), "request port");
  /** requests refused by a full lane: one line per 10 s and a count of the rest (a storm fills a lane thousands of times a second) */
  private readonly laneFull = new LogBudget(1, 10_000, (l) => log.warning(l), "request lane full");

  /** sign-ins sent again get their first copy's reply at once (sign-in-replies.ts) */
  private readonly signIns = new SignInReplies(Date.now);
  /** the sign-ins waiting for their reply: their key in the memory above */
  private readonly signInKeys = new WeakMap<RouterTag, string>();
  /** sign-ins answered from that memory */
  signInsRecalled = 0;
  /** one coarse timer per port: remembered sign-in replies past their time are forgotten even when no sign-in comes */
  private readonly signInSweep = setInterval(() => this.signIns.expire(), signInReplyRememberMs).unref();

  constructor(
    cfg: MasterConfig,
    /** false when the lane is full; `conn`: the request's connection (native transport), on `conns` */
    private readonly submit: (body: Buffer, tag: RouterTag, conn?: number) => boolean,
    private readonly stopping: () => boolean,
    /** native transport: the connections as they open and close, for the request workers */
    conns?: ConnBoard,
    /** the AES key's generation (a rotation makes remembered sign-in replies stale) */
    private readonly aesGeneration: () => number = () => 0,
  ) {
    if (cfg.brine_minion_transport === "native") {
      this.native = new NativeRouter({ backlog: cfg.zmq_backlog, ipv6: cfg.ipv6 }, (frames, oversizedBytes) => this.onRequest(frames, oversizedBytes), conns);
      this.out = this.native;
    } else {
      const router = new Router({ backlog: cfg.zmq_backlog, linger: 0, ipv6: cfg.ipv6, mandatory: false });
      setBatchSizes(router, cfg.brine_zmq_batch_bytes);
      this.router = router;
      this.out = new SendQueue((m) => router.send(m), "router");
    }
  }

  async bind(endpoint: string): Promise<void> {
    await (this.native ?? this.router)!.bind(endpoint);
  }

  reply(tag: RouterTag, reply: Buffer): void {
    const key = this.signInKeys.get(tag);
    if (key !== undefined) {
      this.signInKeys.delete(tag);
      this.signIns.remember(key, reply, this.aesGeneration());
    }
    this.out.push([...tag, reply]);
  }

  private onRequest(frames: Buffer[], oversizedBytes?: number): void {
    if (oversizedBytes !== undefined) {
      // the native transport read a request over frameBytesMax through without storing it: answered as a worker would
      this.tooLarge.line(`bad load received on socket: frame of ${oversizedBytes} bytes exceeds frameBytesMax`);
      this.reply(frames, TOO_LARGE_REPLY);
      return;
    }
    if (frames.length < 2) return; // an identity with no body: nothing to answer
    const body = frames[frames.length - 1]!;
    const tag = frames.slice(0, -1);
    if (this.stopping()) {
      if (classify(body) === "clear") this.reply(tag, SHUTDOWN_REPLY);
      else this.laneFull.line("master stopping: an AES request is left unanswered (its minion sends it again after its timeout)");
      return;
    }
    const key = this.signIns.keyOf(body);
    if (key !== undefined) {
      const earlier = this.signIns.recall(key, this.aesGeneration());
      if (earlier) {
        this.signInsRecalled++;
        this.out.push([...tag, earlier]);
        return;
      }
      this.signInKeys.set(tag, key);
    }
    if (!this.submit(body, tag, this.native ? tag[0]!.readUInt32BE(1) : undefined)) {
      if (classify(body) === "clear") {
        this.laneFull.line("request lane full; answering retry-later");
        this.reply(tag, QUEUE_FULL_REPLY);
      } else this.laneFull.line("request lane full; an AES request is left unanswered (its minion sends it again after its timeout)");
    }
  }

  /** Reads requests until close(). */
  async run(): Promise<void> {
    if (this.native) {
      this.native.start();
      return;
    }
    try {
      for await (const frames of this.router!) this.onRequest(frames);
    } catch (e) {
      if (!this.closed) log.error(`request socket failed: ${(e as Error).message}`);
    }
  }

  /** connections closed for not finishing their ZMTP handshake in time (native transport; libzmq does not say) */
  get handshakeTimeouts(): number {
    return this.native?.handshakeTimeouts ?? 0;
  }

  async drained(): Promise<void> {
    await this.out.drained();
  }

  close(): void {
    this.closed = true;
    clearInterval(this.signInSweep);
    this.router?.close();
    this.native?.close();
  }
}
