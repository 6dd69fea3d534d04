/**
 * The API thread (a worker_thread of the master, started by src/main-thread/api-host.ts): fastify on the
 * configured host and port, the bus feed, and the link that carries clear requests to the master's
 * request lanes. It holds no key and no credentials of its own.
 */
import { parentPort } from "node:worker_threads";
import { getLogger } from "../shared/log.js";
import { buildApp } from "./app.js";
import { BusFeed } from "./bus-feed.js";
import { MasterLink } from "./master-link.js";
import type { ApiInit, ApiToMain, MainToApi } from "./messages.js";
import { Netapi } from "./netapi.js";
import { readApiOptions } from "./options.js";
import { readOption } from "../shared/config/options.js";
import { threadInit } from "../shared/thread-kit.js";
import { clientSocketsSettled, closeClientSockets } from "../lib/client/local-client.js";

const init = threadInit<ApiInit>("api");
const log = getLogger("brine.api");
const port = parentPort!;
const post = (m: ApiToMain) => port.postMessage(m);

/** what a stop closes besides the request sockets, once main() has it (the listener, the bus feed, the link) */
let closeServing: (() => Promise<void>) | undefined;

// a stop may come at any time, even while the thread starts: the request sockets first (a thread ended while a
// zeromq socket waits for its reply aborts the process), then the rest; the host ends the thread on `stopped`
port.on("message", (m: MainToApi) => {
  if (m.k !== "stop") return;
  closeClientSockets();
  void (closeServing?.() ?? Promise.resolve())
    .catch((e: Error) => log.warning(`HTTP API did not close cleanly: ${e.message}`))
    // libzmq must have let go of what the closed sockets still held before the thread may end (zmq-settle.ts)
    .then(() => clientSocketsSettled())
    .finally(() => post({ k: "stopped" }));
});

async function main(): Promise<void> {
  const opts = readApiOptions(init.cfg);
  const link = new MasterLink(port, readOption(init.cfg, "brine_clear_request_bytes_max"));
  const bus = new BusFeed(init.cfg.sock_dir);
  const netapi = new Netapi(init.cfg, opts, link, bus);
  const app = await buildApp({ cfg: init.cfg, opts, netapi, feed: bus, fire: (tag, data) => link.fire(tag, data), masterInFlight: () => link.inFlight });
  await app.listen({ port: opts.port, host: opts.host });
  const addr = app.server.address();
  const bound = typeof addr === "object" && addr ? addr.port : opts.port;
  log.info(`HTTP API (${opts.section}) listening on ${opts.disableSsl ? "http" : "https"}://${opts.host}:${bound}`);
  if (opts.disableSsl && !/^(127\.|::1$|localhost$)/.test(opts.host)) {
    log.warning(`HTTP API serves plain HTTP on ${opts.host}: passwords and tokens cross the network in clear; set ssl_crt and ssl_key, or host: 127.0.0.1`);
  }
  closeServing = async () => {
    link.close();
    bus.close();
    // open /events streams never end on their own: close every connection, then the listener
    app.server.closeAllConnections?.();
    await app.close();
  };
  post({ k: "listening", port: bound });
}

main().catch((e: Error) => {
  log.error(`HTTP API failed to start: ${e.message}`);
  post({ k: "failed", message: e.message });
});
