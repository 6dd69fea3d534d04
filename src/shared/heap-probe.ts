/**
 * Each thread's V8 heap, asked for from any thread of the master process (issue 17's memory breakdown):
 * every thread started through the worker kit (and the request workers and the main thread) answers on
 * one process-wide BroadcastChannel with `v8.getHeapStatistics()`, labelled with its name. `brine.memory`
 * (a runner thread) asks and collects the answers for a short window. Nothing is kept per minion or per
 * request; an idle master pays one unref'd channel per thread.
 */
import { BroadcastChannel, threadId } from "node:worker_threads";
import v8 from "node:v8";

export const heapProbeChannelName = "brine-heap-probe";

export interface ThreadHeap {
  thread: string;
  threadId: number;
  /** V8's used heap (live objects and garbage not yet collected), bytes */
  usedBytes: number;
  /** the heap V8 has reserved and committed for this isolate, bytes */
  totalBytes: number;
  /** memory V8 allocated with malloc for this isolate (not in its heap spaces), bytes */
  mallocedBytes: number;
  /** ArrayBuffer and Buffer backing stores this isolate holds (outside the V8 heap), bytes */
  externalBytes: number;
  /** of totalBytes, the young generation's (new space and new large objects), bytes: it grows under a burst of allocations and stays */
  youngBytes: number;
}

type ProbeMessage = { t: "ask"; nonce: number; gc: boolean } | { t: "heap"; nonce: number; heap: ThreadHeap };

let answering = false;

/** The global gc() node's --expose-gc installs; undefined without that flag. */
function exposedGc(): (() => void) | undefined {
  const g = (globalThis as { gc?: () => void }).gc;
  return typeof g === "function" ? g : undefined;
}

/** This thread's heap figures now; with `gc` (and node's --expose-gc), after a full collection. */
export function ownHeap(thread: string, gc = false): ThreadHeap {
  if (gc) exposedGc()?.();
  const h = v8.getHeapStatistics();
  let youngBytes = 0;
  for (const sp of v8.getHeapSpaceStatistics()) if (sp.space_name === "new_space" || sp.space_name === "new_large_object_space") youngBytes += sp.space_size;
  return {
    thread,
    threadId,
    usedBytes: h.used_heap_size,
    totalBytes: h.total_heap_size,
    mallocedBytes: h.malloced_memory,
    externalBytes: h.external_memory,
    youngBytes,
  };
}

/** Answer probes from other threads with this thread's heap (once per thread; the channel does not keep the thread alive). */
export function answerHeapProbes(thread: string): void {
  if (answering) return;
  answering = true;
  const ch = new BroadcastChannel(heapProbeChannelName);
  ch.unref();
  ch.onmessage = (ev) => {
    const m = (ev as MessageEvent).data as ProbeMessage;
    if (m?.t === "ask") ch.postMessage({ t: "heap", nonce: m.nonce, heap: ownHeap(thread, m.gc === true) } satisfies ProbeMessage);
  };
}

/**
 * Thread `thread`'s heap as it answered last: asked every `everyMs` (no collection first), for a caller that samples it
 * while it works (bench/state-sync.ts, at each new peak of the process's RSS). stop() closes the channel.
 */
export function watchHeap(thread: string, everyMs: number): { latest(): ThreadHeap | undefined; stop(): void } {
  const ch = new BroadcastChannel(heapProbeChannelName);
  const nonce = Math.floor(Math.random() * 2 ** 31);
  let latest: ThreadHeap | undefined;
  ch.onmessage = (ev) => {
    const m = (ev as MessageEvent).data as ProbeMessage;
    if (m?.t === "heap" && m.nonce === nonce && m.heap.thread === thread) latest = m.heap;
  };
  const timer = setInterval(() => ch.postMessage({ t: "ask", nonce, gc: false } satisfies ProbeMessage), everyMs);
  return {
    latest: () => latest,
    stop() {
      clearInterval(timer);
      ch.close();
    },
  };
}

/** Whether this process can collect garbage on request (node ran with --expose-gc). */
export function gcExposed(): boolean {
  return exposedGc() !== undefined;
}

/**
 * Every answering thread's heap, with this thread's own first (as `self`): the answers that arrive within
 * `waitMs` (a thread busy for longer is missing from the list, not waited for). With `gc`, each thread
 * collects its garbage first when node runs with --expose-gc (else the figures include garbage).
 */
export async function probeHeaps(self: string, waitMs: number, gc = false): Promise<ThreadHeap[]> {
  const ch = new BroadcastChannel(heapProbeChannelName);
  const nonce = Math.floor(Math.random() * 2 ** 31);
  const out: ThreadHeap[] = [ownHeap(self, gc)];
  ch.onmessage = (ev) => {
    const m = (ev as MessageEvent).data as ProbeMessage;
    if (m?.t === "heap" && m.nonce === nonce && m.heap.threadId !== threadId) out.push(m.heap);
  };
  ch.postMessage({ t: "ask", nonce, gc } satisfies ProbeMessage);
  await new Promise((r) => setTimeout(r, waitMs));
  ch.close();
  return out;
}
