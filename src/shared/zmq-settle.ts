/**
 * Waiting until libzmq is done with a thread's closed sockets, before that thread may end.
 *
 * zeromq.js sends a Buffer over 128 bytes without copying it: libzmq holds the bytes, and when it drops the
 * message (sent, or discarded by a close with linger 0) it hands the buffer back to the sending thread's
 * zeromq.js module, from one of libzmq's own threads. A close returns at once and the drop happens later, on
 * libzmq's threads, which every brine thread shares (one global context). A thread that ends in between has
 * freed that module: the hand-back writes into freed memory and glibc aborts the whole process ("corrupted
 * double-linked list"; a refused joiner master died so in a fresh-clone CI run at load 30, its Raft worker
 * ended right after a join attempt's DEALER closed with its REFUSE frame still queued).
 *
 * libzmq reports MONITOR_STOPPED to a socket's observer only once the socket is destroyed, after its pipes,
 * and every message in them, are gone: a socket whose observer has ended holds nothing of its thread's. So a
 * thread's closable sockets each get an observer here, and its close waits for them all (bounded) before it
 * lets itself be ended.
 */
import type * as zmq from "zeromq";

export class ZmqSettle {
  private readonly open = new Set<zmq.Observer>();

  /** Follows `sock` until libzmq has destroyed it; returns its observer (the caller may listen to it too). */
  watch(sock: zmq.Socket): zmq.Observer {
    const o = sock.events;
    // an observer reads (and so learns MONITOR_STOPPED) only while something listens
    o.on("end", () => undefined);
    this.drop();
    this.open.add(o);
    return o;
  }

  /** Sockets watched whose observer has not ended yet, count. */
  get pending(): number {
    this.drop();
    return this.open.size;
  }

  /** Resolves once every watched socket is destroyed, or after `waitMs`; with the count still pending. */
  async settled(waitMs: number): Promise<number> {
    for (const until = Date.now() + waitMs; this.pending > 0 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 2));
    return this.pending;
  }

  private drop(): void {
    for (const o of this.open) if (o.closed) this.open.delete(o);
  }
}
