/**
 * A preload (`node --import dist/test/helpers/fault-hook.js`) for a master process under test: while the file
 * named by BRINE_FAULT_FILE exists, in every thread of that process, every minion request handler (AES commands,
 * the fileserver's included) throws or rejects, the key store and the root key throw (so `_auth` and `publish`
 * fail too), and it adds runners that throw, reject, return what msgpack cannot encode, or end their thread.
 * While `${BRINE_FAULT_FILE}.worker-exit` exists, a `_minion_event` ends the request worker thread that handles it.
 * Nothing of it is in the master's own code: the test checks that a failure anywhere is answered and the
 * process serves on.
 */
import { existsSync } from "node:fs";
import { isMainThread, workerData } from "node:worker_threads";
import { AES_FUNCS } from "../../src/workers/req-handler/aes-funcs.js";
import { KeyStore } from "../../src/lib/pki/key-store.js";
import { MasterContext } from "../../src/workers/req-handler/context.js";
import { RUNNERS } from "../../src/runners/registry.js";
import { Crypticle } from "../../src/shared/protocol/crypticle.js";

const flag = process.env.BRINE_FAULT_FILE;
const on = () => flag !== undefined && existsSync(flag);

const get = Map.prototype.get;
(AES_FUNCS as unknown as { get: (name: string) => unknown }).get = function (name: string) {
  const h = get.call(this, name) as ((...a: unknown[]) => unknown) | undefined;
  if (!h) return h;
  return (...a: unknown[]) => {
    // a request worker that ends in the middle of a batch (its V8 heap bound reached, say): the thread, not the process
    if (name === "_minion_event" && flag !== undefined && existsSync(`${flag}.worker-exit`)) process.exit(7);
    if (!on()) return h(...a);
    if (name.length % 2 === 0) throw new Error(`injected fault in ${name}`);
    return Promise.reject(new Error(`injected fault in ${name} (async)`));
  };
};

// what the request path itself needs to open a request and seal its reply keeps working (reading an accepted
// key, the AES key, firing events): the faults are in what the handlers do
const keep = new Set(["constructor", "read", "file", "aes", "minionPublicKey", "fire", "fireSpans"]);
for (const proto of [KeyStore.prototype, MasterContext.prototype] as unknown as Record<string, unknown>[]) {
  for (const name of Object.getOwnPropertyNames(proto)) {
    const orig = proto[name];
    if (keep.has(name) || typeof orig !== "function") continue;
    proto[name] = function (this: unknown, ...a: unknown[]) {
      if (on()) throw new Error(`injected store fault in ${name}`);
      return (orig as (...x: unknown[]) => unknown).apply(this, a);
    };
  }
}

Object.assign(RUNNERS, {
  "test.throws": () => {
    throw new Error("injected: a runner that throws");
  },
  "test.rejects": async () => {
    throw new Error("injected: a runner that rejects");
  },
  "test.unencodable": async () => {
    const o: Record<string, unknown> = { a: 1 };
    o.self = o;
    return o;
  },
  "test.exits": async () => {
    process.exit(3);
  },
});

// request workers only (Piscina's): not the publisher thread (its failure is fatal by design) nor runner threads
const wd = workerData as Record<string, unknown> | undefined;
if (!isMainThread && flag !== undefined && !(wd && typeof wd === "object" && ("signPubMessages" in wd || "fun" in wd))) {
  const t = setInterval(() => {
    if (!existsSync(`${flag}.idle-crash`)) return;
    clearInterval(t);
    throw new Error("injected: a worker thread fails outside any task");
  }, 100);
  t.unref();
}

if (!isMainThread && flag !== undefined && wd && typeof wd === "object" && "signPubMessages" in wd) {
  const dumps = Crypticle.prototype.dumps;
  Crypticle.prototype.dumps = function (this: Crypticle, ...a: Parameters<typeof dumps>) {
    if (existsSync(`${flag}.publisher`)) throw new Error("injected: the publisher cannot seal this publish");
    return dumps.apply(this, a);
  };
}
