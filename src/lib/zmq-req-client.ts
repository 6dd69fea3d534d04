/**
 * The minion's request socket, as Salt's `salt/transport/zeromq.py: RequestClient` drives it: one ZeroMQ
 * REQ socket, one request at a time, and on a timeout the socket is closed and a new one opened before
 * the request is sent again (a REQ socket cannot send twice without a reply). Requests from one minion
 * are queued, never interleaved.
 *
 * Timeouts come from the shared coarse timer, never from a Node timer per request.
 */
import * as zmq from "zeromq";
import { BrineError } from "../shared/errors.js";
import { sharedTimer, type CoarseTimer } from "../shared/coarse-timer.js";

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
}

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
    const tries = Math.max(1, opts.tries);
    for (let attempt = 1; attempt <= tries; attempt++) {
      if (this.closed) throw new BrineError("MINION_STOPPED");
      let sock: zmq.Request;
      try {
        sock = this.socket();
      } catch (e) {
        // no socket could be made (EMFILE: the context's sockets are all taken, the ones closed after a timeout
        // not yet reaped by libzmq, or the process's descriptors): this attempt fails as a timeout would, after
        // its time, and the next one tries again
        if (attempt === tries) throw new BrineError("MINION_REQ_TIMEOUT", `no socket for the request: ${(e as Error).message}`);
        await new Promise<void>((r) => this.timer.after(opts.timeoutMs, r));
        continue;
      }
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
        this.timeouts++;
        if (opts.attemptOf) this.opts.onTimeout?.(opts.label, opts.attemptOf.attempt, opts.attemptOf.tries);
        else this.opts.onTimeout?.(opts.label, attempt, tries);
      }
    }
    throw new BrineError("MINION_REQ_TIMEOUT", `${tries} × ${opts.timeoutMs} ms`);
  }

  close(): void {
    this.closed = true;
    this.drop();
  }
}
