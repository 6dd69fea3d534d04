/**
 * Which of the request port's connections have closed, for the request workers (native transport only: libzmq
 * does not say which peer went). A Salt 3007.x minion whose request timed out closes that connection and sends
 * the request again on a new one (salt/transport/zeromq.py `RequestClient._send_recv`), so in a sign-in storm most
 * of the sign-ins waiting in the clear lane may belong to connections that are already gone: a worker that checks
 * here first answers those without the RSA work nobody would read (worker.ts; the reply is dropped by the router).
 *
 * One Int32 slot per routing id modulo `connBoardSlots`. The main thread (the only writer) stores the id when the
 * connection opens and its complement (`~id`) when it closes; a reader calls a connection gone only when its slot
 * holds exactly `~id`, which only that connection's own close writes. A newer connection sharing the slot
 * overwrites it: the older one then reads "not known to be gone" and its request is worked on, as without the
 * board. So a live connection is never read as gone; a gone one may be missed (its work is done, as before).
 */

/** Slots of the board (Int32 each: 256 KiB), a power of two; more than the connections one process can hold. */
export const connBoardSlots = 1 << 16;
const mask = connBoardSlots - 1;

export class ConnBoard {
  private readonly slots: Int32Array;

  constructor(readonly sab: SharedArrayBuffer = new SharedArrayBuffer(connBoardSlots * 4)) {
    this.slots = new Int32Array(sab);
  }

  /** The connection with routing id `id` (unsigned 32-bit) is open. */
  opened(id: number): void {
    Atomics.store(this.slots, id & mask, id | 0);
  }

  /** The connection with routing id `id` has closed. */
  closed(id: number): void {
    Atomics.store(this.slots, id & mask, ~id);
  }

  /** True when the connection `id` is known to have closed (false: open, or not known). */
  gone(id: number): boolean {
    return Atomics.load(this.slots, id & mask) === ~id;
  }
}
