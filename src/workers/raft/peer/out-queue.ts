/** The peer channel's per-peer outgoing queue: unsealed bodies in order, with byte accounting. */

export interface OutItem {
  body: Uint8Array;
  /** request id for requests (0 for one-way messages) */
  requestId: number;
  cancelled: boolean;
}

/** A FIFO with O(1) push and shift (Array.shift is O(n) on long arrays). */
export class Fifo<T> {
  private items: (T | undefined)[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  peek(): T | undefined {
    return this.items[this.head];
  }

  push(it: T): void {
    this.items.push(it);
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const it = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return it;
  }

  clear(): void {
    this.items = [];
    this.head = 0;
  }
}

/** The per-peer queue: a Fifo of OutItems with byte accounting. */
export class OutQueue {
  private readonly fifo = new Fifo<OutItem>();
  bytes = 0;

  get length(): number {
    return this.fifo.length;
  }

  peek(): OutItem | undefined {
    return this.fifo.peek();
  }

  push(it: OutItem): void {
    this.fifo.push(it);
    this.bytes += it.body.length;
  }

  shift(): OutItem | undefined {
    const it = this.fifo.shift();
    if (it) this.bytes -= it.body.length;
    return it;
  }

  clear(): void {
    this.fifo.clear();
    this.bytes = 0;
  }
}
