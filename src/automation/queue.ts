/**
 * The reactor's bounded work queue: at most `concurrency` tasks run at once (Salt's reactor_worker_threads),
 * at most `hwm` wait (Salt's reactor_worker_hwm); a task past that is dropped, counted and logged, never
 * queued without bound (Salt's ThreadPool.fire_async answers False and logs "TaskPool queue is full!").
 */
export class BoundedQueue<T> {
  private readonly waiting: T[] = [];
  private head = 0;
  private active = 0;
  /** tasks refused because the queue was full */
  dropped = 0;
  /** tasks finished (successfully or not) */
  done = 0;

  constructor(
    private readonly concurrency: number,
    private readonly hwm: number,
    private readonly run: (item: T) => Promise<void>,
    private readonly onDrop: (item: T, dropped: number) => void,
  ) {}

  get length(): number {
    return this.waiting.length - this.head;
  }

  get running(): number {
    return this.active;
  }

  /** false when the item was dropped */
  push(item: T): boolean {
    if (this.active < this.concurrency) {
      this.start(item);
      return true;
    }
    if (this.length >= this.hwm) {
      this.dropped++;
      this.onDrop(item, this.dropped);
      return false;
    }
    this.waiting.push(item);
    return true;
  }

  /** Forgets every waiting task (a stopping master); running ones finish. Returns how many were waiting. */
  clear(): number {
    const n = this.length;
    this.waiting.length = 0;
    this.head = 0;
    return n;
  }

  private start(item: T): void {
    this.active++;
    void this.run(item)
      .catch(() => undefined)
      .finally(() => {
        this.active--;
        this.done++;
        this.next();
      });
  }

  private next(): void {
    while (this.active < this.concurrency && this.length > 0) {
      const item = this.waiting[this.head]!;
      this.waiting[this.head++] = undefined as T;
      if (this.head > 1024 && this.head * 2 > this.waiting.length) {
        this.waiting.splice(0, this.head);
        this.head = 0;
      }
      this.start(item);
    }
  }
}
