/**
 * The API thread's only way to act: a clear request to the master, as salt-api sends one over the
 * request port (`{"enc": "clear", "load": {...}}`), carried over the thread's port into the request
 * lanes (src/api/host.ts). The reply is decoded with the wire decoder's limits. Requests that get no
 * reply within `masterReplyMs` fail with API_MASTER (answered 503, as salt-api answers a request
 * timeout).
 */
import type { MessagePort } from "node:worker_threads";
import { BrineError } from "../errors.js";
import { decodeWire, encodeWire, type WireValue } from "../protocol/msgpack.js";
import type { ApiToMain, MainToApi } from "./messages.js";

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
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: WireValue) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();

  constructor(private readonly port: MessagePort) {
    port.on("message", (m: MainToApi) => {
      if (m.t !== "rep") return;
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      clearTimeout(p.timer);
      try {
        p.resolve(decodeWire(m.body));
      } catch (e) {
        p.reject(new BrineError("API_MASTER", `undecodable reply: ${(e as Error).message}`));
      }
    });
  }

  get inFlight(): number {
    return this.pending.size;
  }

  /** One clear request; `source` (the HTTP client's address) reaches the master's audit line and login throttle. */
  request(load: Record<string, unknown>, source?: string): Promise<WireValue> {
    if (this.pending.size >= masterInFlightMax) return Promise.reject(new BrineError("API_MASTER", "too many requests in flight"));
    const id = this.nextId++;
    const body = new Uint8Array(encodeWire({ enc: "clear", load }));
    return new Promise<WireValue>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new BrineError("API_MASTER", `no reply within ${masterReplyMs} ms`));
      }, masterReplyMs);
      this.pending.set(id, { resolve, reject, timer });
      this.port.postMessage({ t: "req", id, body, ...(source ? { source } : {}) } satisfies ApiToMain, [body.buffer]);
    });
  }

  fire(tag: string, data: unknown): void {
    this.port.postMessage({ t: "fire", tag, data } satisfies ApiToMain);
  }

  close(): void {
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new BrineError("API_MASTER", "the API is stopping"));
      this.pending.delete(id);
    }
  }
}
