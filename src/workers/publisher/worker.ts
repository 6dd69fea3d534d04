/**
 * The publisher thread. Owns the publish serial: it is the only place serials are assigned, and it
 * handles publishes one at a time in arrival order, so frames leave in serial order (a minion drops a
 * serial not greater than the last it saw under the same key). Per publish: serial, AES encrypt
 * without nonce, PKCS#1 v1.5 signature of the ciphertext (`sign_pub_messages`), one msgpack frame.
 * The serial restarts at 1 whenever the shared AES key's generation changes (never reuse a key
 * while resetting its serial).
 *
 * Clustered (no serial), a publish is sealed and signed once in the cluster: the frames of this master's own
 * publishes go back to the main thread with their loads for the peers, and a peer's sealed frame is sent as it
 * came when this master's minions accept it (sealed-frame.ts: an HMAC and a signature check, no signing), its
 * load sealed here otherwise.
 */
import { parentPort } from "node:worker_threads";
import { createPublicKey } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { Crypticle } from "../../shared/protocol/crypticle.js";
import { decodeWire, encodeWire, isMap } from "../../shared/protocol/msgpack.js";
import { privateKey, rsaSign, rsaVerify, isSigAlgo, DEFAULT_SIG_ALGO } from "../../shared/protocol/rsa.js";
import { SharedSecrets } from "../../shared/secrets.js";
import type { PublisherInit, PublisherMessage, PublisherReply, PublisherCounts, PublisherForwarded } from "./messages.js";
import { sealedFrameFault, type SealedFrameRules } from "./sealed-frame.js";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { threadInit } from "../../shared/thread-kit.js";

const log = getLogger("brine.publisher");
/** a peer's frames not sent as they came: a few lines per 10 s, then a count of what was held back */
const refusedLog = new LogBudget(5, 10_000, (line) => log.warning(line), "forwarded publishes");

const init = threadInit<PublisherInit>("publisher");
const secrets = new SharedSecrets(init.secrets);
const priv = privateKey(readFileSync(path.join(init.pkiDir, `${init.keyName ?? "master"}.pem`), "utf8"));
const pub = createPublicKey(priv);
const sigAlgo = isSigAlgo(init.signingAlgorithm) ? init.signingAlgorithm : DEFAULT_SIG_ALGO;
let current: { gen: number; c: Crypticle; serial: number } | undefined;
const counts: PublisherCounts = { sealed: 0, signed: 0, passed: 0, refused: 0, dropped: 0 };

function crypticle(): NonNullable<typeof current> {
  const { key, generation } = secrets.aesKey();
  if (!current || current.gen !== generation) current = { gen: generation, c: new Crypticle(key), serial: 0 };
  return current;
}

function wrap(load: Record<string, unknown>): Buffer {
  const cur = crypticle();
  const body = init.clustered ? load : { ...load, serial: ++cur.serial };
  const enc = cur.c.dumps(body);
  counts.sealed++;
  const env: Record<string, unknown> = { enc: "aes", load: enc };
  if (init.signPubMessages) {
    env.sig = rsaSign(priv, enc, sigAlgo);
    env.sig_algo = sigAlgo;
    counts.signed++;
  }
  return encodeWire(env);
}

const rules: SealedFrameRules = {
  signed: init.signPubMessages,
  sigAlgo,
  authentic: (sealed) => crypticle().c.authentic(sealed),
  verifies: (sealed, sig) => rsaVerify(pub, sealed, sig, sigAlgo),
};

/** Seals `load` into `frames`; a load this thread cannot seal is dropped and logged. */
function sealInto(frames: Uint8Array[], load: Record<string, unknown>): boolean {
  try {
    frames.push(wrap(load));
    return true;
  } catch (e) {
    // a throw here would end the thread, and with it the master (the serial it owns cannot move to another thread)
    counts.dropped++;
    log.error(`publish of ${String(load.fun)} (jid ${String(load.jid)}) could not be sealed and was dropped: ${(e as Error).message}`);
    return false;
  }
}

/** The loads of a peer's batch, or undefined (logged) when they are not an array of maps. */
function peerLoads(req: PublisherForwarded): Record<string, unknown>[] | undefined {
  let loads: unknown;
  try {
    loads = decodeWire(req.loads);
  } catch (e) {
    log.warning(`publishes forwarded by ${req.from} dropped: their loads do not decode (${(e as Error).message})`);
    return undefined;
  }
  if (!Array.isArray(loads) || !loads.every(isMap)) {
    log.warning(`publishes forwarded by ${req.from} dropped: their loads are not a list of maps`);
    return undefined;
  }
  return loads as Record<string, unknown>[];
}

function forwarded(req: PublisherForwarded): Uint8Array[] {
  const out: Uint8Array[] = [];
  // serials are per master without cluster_id: a peer's frame never fits (clustering needs cluster_id; kept for safety)
  const sealed = init.clustered ? (req.frames ?? []) : [];
  let loads: Record<string, unknown>[] | undefined | null = null;
  const loadsOnce = () => (loads === null ? (loads = peerLoads(req)) : loads);
  if (sealed.length === 0) {
    // a peer that forwards loads only (an older brine), or nothing sealed
    const all = loadsOnce();
    if (!all) counts.dropped++;
    for (const l of all ?? []) sealInto(out, l);
    return out;
  }
  for (const [i, frame] of sealed.entries()) {
    const fault = frame instanceof Uint8Array ? sealedFrameFault(frame, rules) : "not bytes";
    if (fault === undefined) {
      out.push(frame);
      counts.passed++;
      continue;
    }
    counts.refused++;
    const load = loadsOnce()?.[i];
    refusedLog.line(`a publish frame forwarded by ${req.from} was not sent as it came: ${fault}; ${load ? "its load is sealed here" : "no load for it either, dropped"}`);
    if (load) sealInto(out, load);
    else counts.dropped++;
  }
  return out;
}

parentPort!.on("message", (req: PublisherMessage) => {
  let reply: PublisherReply;
  if (req.k === "fwd") {
    reply = { k: "frames", frames: forwarded(req), counts };
  } else {
    const frames: Uint8Array[] = [];
    const done: Record<string, unknown>[] = [];
    for (const load of req.loads) if (sealInto(frames, load)) done.push(load);
    reply = { k: "frames", frames, counts };
    if (init.clustered && done.length > 0) reply.forward = encodeWire(done);
  }
  parentPort!.postMessage(reply);
});
