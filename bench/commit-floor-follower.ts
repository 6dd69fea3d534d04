/**
 * A follower of bench/commit-floor.ts, run as its own process: a ROUTER on the port given in argv[2] (or, with
 * argv[4] "net", a plain TCP server with 4-byte length-prefixed frames, no libzmq), an LMDB environment in the
 * directory argv[3] opened as the Raft environment is (overlappingSync off, so a commit returns after its
 * fsync). Each message is written in one synchronous transaction and then answered with its first 8 bytes.
 * Prints "ready" once bound.
 */
import net from "node:net";
import * as zmq from "zeromq";
import { open } from "lmdb";

const port = Number(process.argv[2]);
const dir = process.argv[3]!;
const env = open({ path: dir, overlappingSync: false, compression: false });
const log = env.openDB({ name: "log" });
let index = 0;
if (process.argv[4] === "net") {
  const server = net.createServer((sock) => {
    sock.setNoDelay(true);
    let buf: Buffer = Buffer.alloc(0);
    sock.on("data", (d: Buffer) => {
      buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
      while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
        const len = buf.readUInt32BE(0);
        const body = buf.subarray(4, 4 + len);
        buf = buf.subarray(4 + len);
        env.transactionSync(() => log.putSync(index++ % 4096, body));
        const out = Buffer.alloc(12);
        out.writeUInt32BE(8, 0);
        body.copy(out, 4, 0, 8);
        sock.write(out);
      }
    });
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  process.stdout.write("ready\n");
} else {
  const sock = new zmq.Router({ linger: 0 });
  await sock.bind(`tcp://127.0.0.1:${port}`);
  process.stdout.write("ready\n");
  for await (const [rid, body] of sock) {
    env.transactionSync(() => log.putSync(index++ % 4096, body!));
    await sock.send([rid!, body!.subarray(0, 8)]);
  }
}
