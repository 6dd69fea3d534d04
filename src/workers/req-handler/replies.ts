/** Replies the lanes give without running a request (shared by the main thread and the workers). */
import { encodeWire } from "../../shared/protocol/msgpack.js";

/**
 * The reply to a clear request (a sign-in, a CLI call) when its lane is full: a Salt minion's sign-in logs it and
 * tries again after acceptance_wait_time. An AES request gets no reply instead (request-port.ts says why).
 */
export const QUEUE_FULL_REPLY = encodeWire({ error: "request queue is full, retry later" });
/** The reply to a sign-in that waited past its minion's patience (the clear lane's staleMs). */
export const STALE_REPLY = encodeWire({ error: "request waited too long in the queue, retry later" });
/** The reply to every request still waiting when the master stops. */
export const SHUTDOWN_REPLY = encodeWire({ error: "master is shutting down" });
/**
 * The reply to a request over frameBytesMax: "bad load", as request.ts answers it; the native transport sends it
 * from the main thread without ever storing the request's body (src/main-thread/zmtp-server.ts).
 */
export const TOO_LARGE_REPLY = encodeWire({ msg: "bad load" });
/**
 * How a signed clear reply (`{"enc": "clear", "load": <bytes>, "sig": <bytes>}`, Salt's `_clear_signed`: every
 * sign-in reply) starts on the wire: auth.ts writes it, the main thread's sign-in memory recognises it.
 */
export const CLEAR_SIGNED_HEAD = Buffer.from([0x83, 0xa3, ...Buffer.from("enc"), 0xa5, ...Buffer.from("clear"), 0xa4, ...Buffer.from("load")]);
