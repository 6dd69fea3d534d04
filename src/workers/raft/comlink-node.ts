/**
 * comlink over worker_threads. comlink speaks the DOM's addEventListener/postMessage; Node's MessagePort and
 * Worker speak on/off/postMessage. This is the adapter comlink ships as dist/esm/node-adapter.mjs, typed for
 * our build (its .d.ts needs DOM types): listeners receive `{data}` as a DOM MessageEvent would carry it.
 * comlink itself is loaded through its package main (the UMD build), which Node 20's ESM loader imports with
 * named exports.
 */
import type { Endpoint } from "comlink";
import type { MessagePort, Worker } from "node:worker_threads";

type Listener = ((ev: { data: unknown }) => void) | { handleEvent(ev: { data: unknown }): void };

export function nodeEndpoint(nep: MessagePort | Worker): Endpoint {
  const listeners = new WeakMap<object, (data: unknown) => void>();
  const ep = {
    postMessage: (message: unknown, transfer?: readonly unknown[]) => nep.postMessage(message, transfer as never),
    addEventListener: (_type: string, eh: Listener) => {
      const l = (data: unknown) => ("handleEvent" in eh ? eh.handleEvent({ data }) : eh({ data }));
      nep.on("message", l);
      listeners.set(eh, l);
    },
    removeEventListener: (_type: string, eh: Listener) => {
      const l = listeners.get(eh);
      if (!l) return;
      nep.off("message", l);
      listeners.delete(eh);
    },
    start: "start" in nep ? () => nep.start() : undefined,
  };
  return ep as unknown as Endpoint;
}
