/**
 * The publisher thread. Owns the publish serial: it is the only place serials are assigned, and it
 * handles publishes one at a time in arrival order, so frames leave in serial order (a minion drops a
 * serial not greater than the last it saw under the same key). Per publish: serial, AES encrypt
 * without nonce, PKCS#1 v1.5 signature of the ciphertext (`sign_pub_messages`), one msgpack frame.
 * The serial restarts at 1 whenever the shared AES key's generation changes (never reuse a key
 * while resetting its serial).
 */
import { parentPort } from "node:worker_threads";
import { readFileSync } from "node:fs";
import path from "node:path";
import { Crypticle } from "../../shared/protocol/crypticle.js";
import { encodeWire } from "../../shared/protocol/msgpack.js";
import { privateKey, rsaSign, isSigAlgo, DEFAULT_SIG_ALGO } from "../../shared/protocol/rsa.js";
import { SharedSecrets } from "../../shared/secrets.js";
import type { PublisherInit, PublisherRequest, PublisherReply } from "./messages.js";
import { getLogger } from "../../shared/log.js";
import { threadInit } from "../../shared/thread-kit.js";

const log = getLogger("brine.publisher");

const init = threadInit<PublisherInit>("publisher");
const secrets = new SharedSecrets(init.secrets);
const priv = privateKey(readFileSync(path.join(init.pkiDir, `${init.keyName ?? "master"}.pem`), "utf8"));
const sigAlgo = isSigAlgo(init.signingAlgorithm) ? init.signingAlgorithm : DEFAULT_SIG_ALGO;
let current: { gen: number; c: Crypticle; serial: number } | undefined;

function wrap(load: Record<string, unknown>): Buffer {
  const { key, generation } = secrets.aesKey();
  if (!current || current.gen !== generation) current = { gen: generation, c: new Crypticle(key), serial: 0 };
  const body = init.clustered ? load : { ...load, serial: ++current.serial };
  const enc = current.c.dumps(body);
  const env: Record<string, unknown> = { enc: "aes", load: enc };
  if (init.signPubMessages) {
    env.sig = rsaSign(priv, enc, sigAlgo);
    env.sig_algo = sigAlgo;
  }
  return encodeWire(env);
}

parentPort!.on("message", (req: PublisherRequest) => {
  const frames: Buffer[] = [];
  for (const load of req.loads) {
    try {
      frames.push(wrap(load));
    } catch (e) {
      // one load this thread cannot seal is dropped and logged: a throw here would end the thread, and with it
      // the master (the serial it owns cannot move to another thread)
      log.error(`publish of ${String(load.fun)} (jid ${String(load.jid)}) could not be sealed and was dropped: ${(e as Error).message}`);
    }
  }
  const reply: PublisherReply = { k: "frames", frames };
  parentPort!.postMessage(reply);
});
