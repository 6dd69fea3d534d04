/**
 * Entry point of a forked swarm worker process: relays the parent's messages to a SwarmWorker and its
 * reports back over the IPC channel. Exits after "shutdown", or when the parent goes away.
 */
import { SwarmWorker } from "./worker.js";
import type { FromWorker, ToWorker } from "./events.js";

if (!process.send) {
  process.stderr.write("brine-swarm worker: must be started by brine-swarm (no IPC channel)\n");
  process.exit(2);
}

const worker = new SwarmWorker((m: FromWorker) => {
  process.send!(m);
});

process.on("message", (msg: ToWorker) => {
  void worker.handle(msg).then(() => {
    if (msg.t === "shutdown") {
      // let the "bye" message leave before exiting
      setImmediate(() => process.disconnect?.());
    }
  });
});
process.on("disconnect", () => process.exit(0));
