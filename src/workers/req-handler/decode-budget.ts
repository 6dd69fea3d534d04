/**
 * How much decoded request data a request worker holds at once (docs/ARCHITECTURE.md "Heap bounds and the largest
 * input"). One request is bounded by the wire limits (frameBytesMax, msgpackElementsMax: up to ~470 MiB of V8 heap
 * once decoded, 4,000,000 one-byte non-UTF-8 strings at 104 bytes each and the rest of 64 MiB as text); a worker runs up to batchFramesMax × concurrentTasksPerWorker requests at once, and a handler that waits
 * (a minion-initiated return's job load, a pillar compile, a peer master's nonce verdict) keeps its load meanwhile,
 * so a few dozen maximal requests decoded together could pass the worker's V8 heap bound (and V8 aborts the whole
 * process when it goes on allocating past it). Each decode is charged here with what it may take of the heap; a
 * decode that would pass `heldBytesMax` is refused before it starts, or stopped by the element limit it was given,
 * and its request answered "bad load" (the minion signs in again and resends it once, as it does for any
 * "bad load": salt/channel/client.py _crypted_transfer). A charge is given back once its request no longer holds
 * its load. Pure: request.ts takes and gives, worker.ts counts the refusals.
 */
import { msgpackElementsMax } from "../../shared/protocol/limits.js";
import { decodedHeldBytesMax } from "./limits.js";

/**
 * The most V8 heap one decoded msgpack element takes, bytes, besides its string bytes: a non-UTF-8 one-byte string
 * (a Buffer view over the plaintext) with its slot in its container takes 104 bytes, an empty map 64, an empty array
 * 40, a float or a short string 8 (measured on Node 20: heap used after a full GC, per element of 1,000,000 decoded).
 */
export const decodedElementHeapBytesMax = 112;

/** What a decode of `elements` elements from `bytes` bytes may take of the heap at most, bytes. */
export function decodedHeapBytes(elements: number, bytes: number): number {
  return elements * decodedElementHeapBytesMax + bytes;
}

/**
 * A worker's decode budget: what its requests hold decoded, against `heldBytesMax`. Decodes are synchronous, one
 * request at a time: the request being handled is charged (charge), may let go of its loads before it first waits
 * (letGo), and once its handling returns its charge is handed over (detach) and given back when its reply is ready.
 */
export class DecodeBudget {
  private heldBytes = 0;
  /** what the request being handled was charged and still holds */
  private current = 0;

  constructor(readonly heldBytesMax: number = decodedHeldBytesMax) {}

  /** Bytes charged to requests that still hold their loads. */
  get held(): number {
    return this.heldBytes;
  }

  /**
   * How many elements a decode of `bytes` bytes may make now (at most `elementsMax`, the decode's own limit), or
   * -1 when its bytes alone would pass what is left: the decode is refused before it starts.
   */
  elementsFor(bytes: number, elementsMax: number = msgpackElementsMax): number {
    const left = this.heldBytesMax - this.heldBytes - bytes;
    if (left < 0) return -1;
    return Math.min(elementsMax, Math.floor(left / decodedElementHeapBytesMax));
  }

  /** The request being handled decoded `elements` elements from `bytes` bytes. */
  charge(elements: number, bytes: number): void {
    const c = decodedHeapBytes(elements, bytes);
    this.heldBytes += c;
    this.current += c;
  }

  /** The request being handled keeps nothing it decoded (a handler says so before it first waits). */
  letGo(): void {
    this.give(this.detach());
  }

  /** The request being handled returned: its charge, to give back once its reply is ready (0 when it let go). */
  detach(): number {
    const c = this.current;
    this.current = 0;
    return c;
  }

  /** A request's charge (from detach) is free again. */
  give(charge: number): void {
    this.heldBytes = Math.max(0, this.heldBytes - charge);
  }
}
