/**
 * libzmq's per-connection buffers on the minion-facing sockets. Each TCP connection of a ROUTER or PUB gets
 * an encoder and a decoder buffer of ZMQ_OUT_BATCH_SIZE / ZMQ_IN_BATCH_SIZE bytes (8,192 each by default), the
 * largest share of libzmq's memory per connected minion (bench/fleet-memory.ts measures it). Messages larger
 * than the buffer are not copied through it, so a smaller batch costs syscalls only when many small messages
 * queue on one connection, which a minion's one request in flight and its publishes rarely do.
 */
import type { Socket } from "zeromq";

/** libzmq's option numbers (zmq_draft.h; the bundled libzmq 4.3.5 honours them). */
const ZMQ_IN_BATCH_SIZE = 101;
const ZMQ_OUT_BATCH_SIZE = 102;

/** Set both batch sizes of `socket`, bytes; applies to the connections it accepts afterwards. */
export function setBatchSizes(socket: Socket, bytes: number): void {
  // zeromq.js exposes libzmq's numbered options only as protected methods
  const s = socket as unknown as { setInt32Option(option: number, value: number): void };
  s.setInt32Option(ZMQ_IN_BATCH_SIZE, bytes);
  s.setInt32Option(ZMQ_OUT_BATCH_SIZE, bytes);
}
