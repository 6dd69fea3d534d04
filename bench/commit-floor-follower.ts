/**
 * A follower of bench/commit-floor.ts, run as its own process: a ROUTER on the port given in argv[2], an
 * LMDB environment in the directory argv[3] opened as the Raft environment is (overlappingSync off, so a
 * commit returns after its fsync). Each message is written in one synchronous transaction and then answered
 * with its first 8 bytes. Prints "ready" once bound.
 */
import * as zmq from "zeromq";
import { open } from "lmdb";

const port = Number(process.argv[2]);
const dir = process.argv[3]!;
const env = open({ path: dir, overlappingSync: false, compression: false });
const log = env.openDB({ name: "log" });
const sock = new zmq.Router({ linger: 0 });
await sock.bind(`tcp://127.0.0.1:${port}`);
process.stdout.write("ready\n");
let index = 0;
for await (const [rid, body] of sock) {
  env.transactionSync(() => log.putSync(index++ % 4096, body!));
  await sock.send([rid!, body!.subarray(0, 8)]);
}
