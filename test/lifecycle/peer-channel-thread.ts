/**
 * A thread that runs the peer channel as the Raft worker does (src/workers/raft/peer/peer-transport.ts): two
 * transports dialling each other on loopback, sessions up, then each asked to close, then "closed" posted to
 * the host, which ends the thread as ClusterNode.stop does (worker.terminate() once the close is answered).
 * Driven many times over by thread-exit-stress.ts: a thread ended while a zeromq.js object still waits for
 * an event aborts the whole process ("terminate called after throwing an instance of 'Napi::Error'").
 */
import { createPrivateKey, createPublicKey } from "node:crypto";
import { parentPort, workerData } from "node:worker_threads";
import { StaticKeyring } from "../../src/shared/cluster-keys.js";
import { PeerTransport } from "../../src/workers/raft/peer/peer-transport.js";
import type { Logger } from "../../src/shared/log.js";

interface Init {
  /** PEM private keys of "a" and "b" */
  keys: Record<"a" | "b", string>;
  ports: Record<"a" | "b", number>;
  host: string;
}
const init = workerData as Init;
const quiet: Logger = { critical() {}, error() {}, warning() {}, info() {}, debug() {}, trace() {} };
const priv = { a: createPrivateKey(init.keys.a), b: createPrivateKey(init.keys.b) };
const keyring = new StaticKeyring([
  ["a", createPublicKey(priv.a)],
  ["b", createPublicKey(priv.b)],
]);
const transport = (self: "a" | "b", other: "a" | "b") =>
  new PeerTransport({
    clusterId: "exit-stress",
    selfId: self,
    listen: { host: init.host, port: init.ports[self] },
    peers: [{ id: other, host: init.host, port: init.ports[other] }],
    keys: { self: { id: self, privateKey: priv[self], publicKey: createPublicKey(priv[self]) }, keyring },
    limits: { reconnectMinMs: 5, reconnectMaxMs: 50, handshakeTimeoutMs: 3000, heartbeatIntervalMs: 200, heartbeatTimeoutMs: 2000, timerTickMs: 5 },
    log: quiet,
  });
const a = transport("a", "b");
const b = transport("b", "a");
await a.start();
await b.start();
const deadline = Date.now() + 10_000;
while (!(a.isUp("b") && b.isUp("a")) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
const up = a.isUp("b") && b.isUp("a");
await a.close();
await b.close();
parentPort!.postMessage({ up });
