/**
 * The minion's request socket, as Salt's `salt/transport/zeromq.py` drives it: one ZeroMQ REQ socket, one
 * request at a time (requests from one minion are queued, never interleaved). What a timeout does is the
 * version's (`afterTimeout`):
 * - `"reopen"` (3007.x `RequestClient`): the socket is closed and a new one opened before the request is sent
 *   again (a REQ socket cannot send twice without a reply): every try of a timed-out request is a new TCP
 *   connection, and after the last try one more is opened that carries nothing until the next request or the
 *   channel's close. Salt's send/receive loop notices the timed-out request on its next 300 ms poll of the socket,
 *   so the new connection comes up to `reopenDelayMaxMs` after the timeout (random in [0, max]; 0 by default).
 *   Without `afterTimeout` the transport reopens as 3007.x does, minus that last connection.
 * - `"wait"` (3006.8 `AsyncReqMessageClient`): the socket is kept. A try that timed out still holds it until its
 *   reply comes (which is then dropped); each later try waits for it under its own timer, and every try queued
 *   meanwhile is still sent in its turn after the reply before it, timed out or not (Salt's `_send_recv` takes
 *   the socket's lock and sends without looking at its future), until the caller closes the transport.
 *
 * Timeouts come from the shared coarse timer, never from a Node timer per request.
 */
import * as zmq from "zeromq";
import { BrineError } from "../shared/errors.js";
import { sharedTimer, type CoarseTimer, type TimerHandle } from "../shared/coarse-timer.js";

export interface Endpoint {
  host: string;
  port: number;
  /** connect from this local address (libzmq's `tcp://SRC:0;DST:PORT`), so the master sees another peer IP */
  sourceIp?: string;
}

function hostPart(h: string): string {
  return h.includes(":") && !h.startsWith("[") ? `[${h}]` : h;
}

export function tcpAddress(ep: Endpoint): string {
  const dst = `${hostPart(ep.host)}:${ep.port}`;
  return ep.sourceIp ? `tcp://${hostPart(ep.sourceIp)}:0;${dst}` : `tcp://${dst}`;
}

let defaultCtx: zmq.Context | undefined;

/**
 * A context whose socket limit is raised past libzmq's default of 1023. `sockets` is how many this
 * process needs; the value is capped at libzmq's own ceiling (ZMQ_SOCKET_LIMIT).
 */
export function createContext(sockets: number, ioThreads = 1): zmq.Context {
  const ctx = new zmq.Context({ blocky: false, ioThreads });
  ctx.maxSockets = Math.max(1024, Math.min(ctx.maxSocketsLimit, Math.ceil(sockets)));
  return ctx;
}

/** The context minions use when none is given: room for 32k sockets. */
export function defaultContext(): zmq.Context {
  return (defaultCtx ??= createContext(32768));
}

export interface RequestOptions {
  timeoutMs: number;
  tries: number;
  /** what is being sent (for timeout reports), e.g. the command */
  label?: string;
  /** for timeout reports when the caller makes each try itself: this call's try, and the tries in all */
  attemptOf?: { attempt: number; tries: number };
}

/** What a request channel needs from its transport; tests substitute a fake. */
export interface ReqTransport {
  /** Send one body and wait for the one reply body; a timeout reopens the socket and retries. */
  request(body: Buffer, opts: RequestOptions): Promise<Buffer>;
  close(): void;
}

export interface ZmqReqOptions {
  context?: zmq.Context;
  timer?: CoarseTimer;
  /** libzmq RECONNECT_IVL_MAX; Salt's minion REQ uses 5000 */
  reconnectMaxMs?: number;
  /** called on each timeout, with the request's label and the attempt that timed out */
  onTimeout?: (label: string | undefined, attempt: number, tries: number) => void;
  /** what a timeout does to the socket: 3007.x reopens it (default), 3006.8 waits on it (see the header) */
  afterTimeout?: "reopen" | "wait";
  /** "reopen": the new connection comes after a random delay up to this, ms (3007.x's 300 ms poll); default 0 */
  reopenDelayMaxMs?: number;
}

/** 3007.x's send/receive loop polls its socket every 300 ms: a timed-out request's socket is reopened that late at most. */
export const saltReopenPollMs = 300;

export class ZmqReqTransport implements ReqTransport {
  private sock: zmq.Request | undefined;
  private tail: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly timer: CoarseTimer;
  timeouts = 0;

  constructor(
    readonly endpoint: Endpoint,
    private readonly opts: ZmqReqOptions = {},
  ) {
    this.timer = opts.timer ?? sharedTimer;
  }

  private socket(): zmq.Request {
    if (!this.sock) {
      const s = new zmq.Request({
        context: this.opts.context ?? defaultContext(),
        linger: 0,
        reconnectMaxInterval: this.opts.reconnectMaxMs ?? 5000,
      });
      s.connect(tcpAddress(this.endpoint));
      this.sock = s;
    }
    return this.sock;
  }

  private drop(): void {
    const s = this.sock;
    this.sock = undefined;
    this.outstanding = undefined;
    this.owed = 0;
    if (s && !s.closed) s.close();
  }

  request(body: Buffer, opts: RequestOptions): Promise<Buffer> {
    const run = this.tail.then(
      () => this.attempts(body, opts),
      () => this.attempts(body, opts),
    );
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async attempts(body: Buffer, opts: RequestOptions): Promise<Buffer> {
    if (this.opts.afterTimeout === "wait") return this.attemptsOnOneSocket(body, opts);
    const tries = Math.max(1, opts.tries);
    for (let attempt = 1; attempt <= tries; attempt++) {
      const sock = await this.socketForTry(attempt, tries, opts.timeoutMs);
      if (!sock) continue;
      let timedOut = false;
      const h = this.timer.after(opts.timeoutMs, () => {
        timedOut = true;
        if (this.sock === sock) this.drop();
        else if (!sock.closed) sock.close();
      });
      try {
        await sock.send(body);
        const frames = await sock.receive();
        h.cancel();
        return frames[frames.length - 1] ?? Buffer.alloc(0);
      } catch (e) {
        h.cancel();
        if (this.closed) throw new BrineError("MINION_STOPPED");
        if (!timedOut) {
          // the socket failed for another reason: start over on a fresh one
          if (this.sock === sock) this.drop();
          if (attempt === tries) throw new BrineError("MINION_REQ_TIMEOUT", (e as Error).message);
          continue;
        }
        this.timedOut(opts, attempt, tries);
        const delayMax = this.opts.reopenDelayMaxMs ?? 0;
        if (delayMax > 0) await new Promise<void>((r) => this.timer.after(Math.floor(Math.random() * (delayMax + 1)), r));
        if (attempt === tries && this.opts.afterTimeout === "reopen" && !this.closed) {
          // 3007.x reopens after the last try too (its send/receive loop does not know it was the last): a new
          // connection that carries nothing, until the channel is closed or its next request (seen from a real minion)
          try {
            this.socket();
          } catch {
            // no socket now: the next request makes one
          }
        }
      }
    }
    throw new BrineError("MINION_REQ_TIMEOUT", `${tries} × ${opts.timeoutMs} ms`);
  }

  /**
   * The socket for try `attempt` of `tries`, or undefined when none could be made (EMFILE: the context's sockets
   * are all taken, the ones closed after a timeout not yet reaped by libzmq, or the process's descriptors): that
   * try then fails as a timeout would, after its time, and the next one tries again; the last one throws.
   */
  private async socketForTry(attempt: number, tries: number, timeoutMs: number): Promise<zmq.Request | undefined> {
    if (this.closed) throw new BrineError("MINION_STOPPED");
    try {
      return this.socket();
    } catch (e) {
      if (attempt === tries) throw new BrineError("MINION_REQ_TIMEOUT", `no socket for the request: ${(e as Error).message}`);
      await new Promise<void>((r) => this.timer.after(timeoutMs, r));
      return undefined;
    }
  }

  private timedOut(opts: RequestOptions, attempt: number, tries: number): void {
    this.timeouts++;
    if (opts.attemptOf) this.opts.onTimeout?.(opts.label, opts.attemptOf.attempt, opts.attemptOf.tries);
    else this.opts.onTimeout?.(opts.label, attempt, tries);
  }

  /** "wait": the receive of a try that timed out, still holding the socket */
  private outstanding: Promise<unknown> | undefined;
  /** "wait": tries that timed out before their turn came; each is still sent in its turn (3006.8) */
  private owed = 0;

  /** 3006.8's tries: one socket, each try's timer running from its start, timed-out tries still sent in their turn. */
  private async attemptsOnOneSocket(body: Buffer, opts: RequestOptions): Promise<Buffer> {
    const tries = Math.max(1, opts.tries);
    for (let attempt = 1; attempt <= tries; attempt++) {
      const sock = await this.socketForTry(attempt, tries, opts.timeoutMs);
      if (!sock) continue;
      let h: TimerHandle | undefined;
      const expired = new Promise<"timeout">((r) => (h = this.timer.after(opts.timeoutMs, () => r("timeout"))));
      let sent = false;
      try {
        for (;;) {
          if (this.outstanding) {
            if ((await Promise.race([this.outstanding.then(() => "reply", () => "reply"), expired])) === "timeout") break;
            this.outstanding = undefined;
          }
          const mine = this.owed === 0;
          if (!mine) this.owed--; // an earlier try's turn: sent now, its reply dropped
          await sock.send(body);
          const recv = sock.receive();
          recv.catch(() => undefined);
          if (!mine) {
            this.outstanding = recv;
            continue;
          }
          sent = true;
          const r = await Promise.race([recv, expired]);
          if (r === "timeout") {
            this.outstanding = recv;
            break;
          }
          h!.cancel();
          return r[r.length - 1] ?? Buffer.alloc(0);
        }
      } catch (e) {
        h!.cancel();
        if (this.closed) throw new BrineError("MINION_STOPPED");
        // the socket failed for another reason: start over on a fresh one
        this.outstanding = undefined;
        this.owed = 0;
        if (this.sock === sock) this.drop();
        if (attempt === tries) throw new BrineError("MINION_REQ_TIMEOUT", (e as Error).message);
        continue;
      }
      if (!sent) this.owed++;
      this.timedOut(opts, attempt, tries);
    }
    // the tries still owed belong to this request: Salt closes the channel here (its sign-in's `with` block), and so
    // does this transport, so that a later request never sends them
    this.drop();
    throw new BrineError("MINION_REQ_TIMEOUT", `${tries} × ${opts.timeoutMs} ms`);
  }

  close(): void {
    this.closed = true;
    this.drop();
  }
}
