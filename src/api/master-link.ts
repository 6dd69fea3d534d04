/**
 * The API thread's only way to act: a clear request to the master, as salt-api sends one over the
 * request port (`{"enc": "clear", "load": {...}}`), carried over the thread's port into the request
 * lanes (src/main-thread/api-host.ts). The reply is decoded with the wire decoder's limits. Requests that get no
 * reply within `masterReplyMs` fail with API_MASTER (answered 503, as salt-api answers a request
 * timeout).
 */
import type { MessagePort } from "node:worker_threads";
import { BrineError } from "../shared/errors.js";
import { decodeWire, encodeWire, type WireValue } from "../shared/protocol/msgpack.js";
import { msgpackDepthMax } from "../shared/protocol/limits.js";
import type { ApiToMain, MainToApi } from "./messages.js";
import { PortCalls } from "../shared/port-calls.js";

/** How long one clear request may wait for the master's reply (Salt's ReqChannel: 60 s, 3 tries). */
export const masterReplyMs = 60_000;
/** Requests in flight to the master at once; more are refused with 503 at once (the lanes bound the rest). */
export const masterInFlightMax = 10_000;

export interface ClearRequester {
  /** send one clear load; `source` is the HTTP client's address (the master's audit line and login throttle) */
  request(load: Record<string, unknown>, source?: string): Promise<WireValue>;
  /** fire an event on the master's bus (webhooks) */
  fire(tag: string, data: unknown): void;
  readonly inFlight: number;
}

export class MasterLink implements ClearRequester {
  /** requests waiting for the master's reply bytes (deadlines on the coarse timer: no Node timer per request) */
  private readonly calls = new PortCalls<Uint8Array>(masterReplyMs, () => new BrineError("API_MASTER", `no reply within ${masterReplyMs} ms`));

  /** `requestBytesMax`: the master's brine_clear_request_bytes_max, the largest clear request it takes */
  constructor(
    private readonly port: MessagePort,
    private readonly requestBytesMax: number,
  ) {
    port.on("message", (m: MainToApi) => {
      if (m.k === "res") this.calls.resolve(m.id, m.body);
    });
  }

  get inFlight(): number {
    return this.calls.inFlight;
  }

  /** One clear request; `source` (the HTTP client's address) reaches the master's audit line and login throttle. */
  async request(load: Record<string, unknown>, source?: string): Promise<WireValue> {
    if (this.calls.inFlight >= masterInFlightMax) return Promise.reject(new BrineError("API_MASTER", "too many requests in flight"));
    // what the master's decoder would refuse as "bad load" is refused here with a clear answer instead
    if (depthOf(load) > msgpackDepthMax - 2) return Promise.reject(new BrineError("API_BAD_REQUEST", `arguments nested deeper than the master takes (${msgpackDepthMax - 2} levels)`));
    const body = new Uint8Array(encodeWire({ enc: "clear", load }));
    if (body.byteLength > this.requestBytesMax) {
      return Promise.reject(new BrineError("API_REQUEST_TOO_LARGE", `${body.byteLength} bytes; the master takes clear requests up to ${this.requestBytesMax} bytes (brine_clear_request_bytes_max)`));
    }
    const reply = await this.calls.call((id) => this.port.postMessage({ k: "req", id, body, ...(source ? { source } : {}) } satisfies ApiToMain, [body.buffer]));
    try {
      return decodeWire(reply);
    } catch (e) {
      throw new BrineError("API_MASTER", `undecodable reply: ${(e as Error).message}`);
    }
  }

  fire(tag: string, data: unknown): void {
    this.port.postMessage({ k: "fire", tag, data } satisfies ApiToMain);
  }

  close(): void {
    this.calls.rejectAll(new BrineError("API_MASTER", "the API is stopping"));
  }
}

/** Nesting depth of a JSON-like value (iterative: a hostile body cannot exhaust the stack here). */
export function depthOf(v: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[v, 1]];
  while (stack.length) {
    const [x, d] = stack.pop()!;
    if (x === null || typeof x !== "object" || Buffer.isBuffer(x)) continue;
    if (d > max) max = d;
    for (const y of Array.isArray(x) ? x : Object.values(x)) if (y !== null && typeof y === "object") stack.push([y, d + 1]);
  }
  return max;
}
