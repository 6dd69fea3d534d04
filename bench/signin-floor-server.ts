/**
 * The server of bench/signin-floor.ts, its own process: brine's ZMTP ROUTER (src/main-thread/zmtp-server.ts) on a
 * port of its choosing, answering each request with the work a returning minion's `_auth` needs of any master and
 * nothing else: the request's msgpack decoded, the minion's token OAEP-decrypted with the master's key, re-encrypted
 * to the minion's key (its KeyObject parsed once per key), the reply load packed and PKCS#1 v1.5-signed, the reply
 * packed and written. No key store, no events, no session keys, no batching bookkeeping: what is left when a
 * master is only the sign-in's crypto and Node's socket work.
 *
 * argv: [2] the master's private key (PEM file), [3] "inline" (all of it on the main thread) or "hop" (the crypto
 * in one worker thread behind a bare MessagePort, requests batched per turn of the event loop as brine's lanes do).
 * Prints the port once listening.
 */
import { readFileSync } from "node:fs";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { constants, createPrivateKey, createPublicKey, privateDecrypt, publicEncrypt, sign, type KeyObject } from "node:crypto";
import { pack, unpack } from "msgpackr";
import { NativeRouter } from "../src/main-thread/zmtp-server.js";

const oaep = { padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha1" };
/** the reply's fields a real master sends besides the token (sizes as Salt's): an OAEP ciphertext of the AES key, base64 */
const aesField = Buffer.alloc(256, 7).toString("base64");

function signer(keyFile: string): (body: Buffer) => Buffer {
  const priv = createPrivateKey(readFileSync(keyFile));
  const pubPem = createPublicKey(priv).export({ type: "spki", format: "pem" }).toString();
  const minionKeys = new Map<string, KeyObject>();
  return (body) => {
    const req = unpack(body) as { load: { id: string; pub: string; token: Buffer; nonce: string } };
    const load = req.load;
    let key = minionKeys.get(load.pub);
    if (!key) minionKeys.set(load.pub, (key = createPublicKey(load.pub)));
    const token = privateDecrypt({ key: priv, ...oaep }, load.token);
    const reply = pack({ enc: "pub", pub_key: pubPem, token: publicEncrypt({ key, ...oaep }, token), aes: aesField, session: aesField, publish_port: 4505, nonce: load.nonce });
    return pack({ enc: "clear", load: reply, sig: sign("sha1", reply, priv) });
  };
}

if (isMainThread) {
  const [keyFile, mode] = [process.argv[2]!, process.argv[3]];
  if (mode !== "inline" && mode !== "hop") throw new Error(`mode: "inline" or "hop", not ${JSON.stringify(mode)}`);
  let router: NativeRouter;
  if (mode === "inline") {
    const answer = signer(keyFile);
    router = new NativeRouter({ backlog: 1024 }, (frames) => router.push([frames[0]!, frames[1]!, answer(frames[frames.length - 1]!)]));
  } else {
    const worker = new Worker(new URL(import.meta.url), { workerData: keyFile });
    const waiting = new Map<number, Buffer[]>();
    let batch: { n: number; body: Buffer }[] = [];
    let next = 0;
    worker.on("message", (replies: { n: number; reply: Uint8Array }[]) => {
      for (const r of replies) {
        const env = waiting.get(r.n)!;
        waiting.delete(r.n);
        router.push([env[0]!, env[1]!, Buffer.from(r.reply.buffer, r.reply.byteOffset, r.reply.byteLength)]);
      }
    });
    const flush = () => {
      const b = batch;
      batch = [];
      worker.postMessage(b);
    };
    router = new NativeRouter({ backlog: 1024 }, (frames) => {
      const n = next++;
      waiting.set(n, frames);
      if (batch.length === 0) setImmediate(flush);
      batch.push({ n, body: frames[frames.length - 1]! });
    });
  }
  await router.bind("tcp://127.0.0.1:0");
  router.start();
  const port = (router as unknown as { server: { address(): { port: number } } }).server.address().port;
  process.stdout.write(`${port}\n`);
} else {
  const answer = signer(workerData as string);
  parentPort!.on("message", (batch: { n: number; body: Uint8Array }[]) => {
    const out = batch.map((b) => ({ n: b.n, reply: answer(Buffer.from(b.body.buffer, b.body.byteOffset, b.body.byteLength)) }));
    parentPort!.postMessage(out);
  });
}
