/**
 * Property-based fuzzing (fast-check, bounded runs) of the minion-facing request path (issue 13): random
 * bytes, random msgpack envelopes, and well-formed v2/v3 envelopes carrying random loads for every AES
 * command (encrypted with a real session or AES key, with a valid tok, so they reach the handlers), plus
 * random `_auth` loads. Every input gets exactly one reply (handleRequest resolves once, to bytes), never a
 * throw, never a rejection, and never the catch-all "Some exception handling minion payload" (a handler
 * that threw).
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { newEffects, type MasterContext } from "../../src/workers/req-handler/context.js";
import { requestContext, type RequestContext } from "../helpers/request-context.js";
import { handleRequest } from "../../src/workers/req-handler/request.js";
import { AES_FUNCS } from "../../src/workers/req-handler/aes-funcs.js";
import { Crypticle } from "../../src/shared/protocol/crypticle.js";
import { packSalt, sealSalt } from "../../src/lib/minion/wire.js";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";

const HANDLER_THREW = "Some exception handling minion payload";
let rc: RequestContext;
let ctx: MasterContext;
let keys: MinionKeys;
let aesKey: string;

before(async () => {
  rc = await requestContext("brine-fuzz-", "fz");
  ({ ctx, keys, aesKey } = rc);
});
after(() => rc.close());

/** One request through the path: exactly one reply, as bytes, no throw, no handler failure. */
async function oneReply(frame: Buffer): Promise<void> {
  let p: Promise<Buffer>;
  assert.doesNotThrow(() => (p = handleRequest(ctx, frame, newEffects())));
  const reply = await p!;
  assert.ok(Buffer.isBuffer(reply) && reply.length > 0);
  assert.ok(!reply.includes(HANDLER_THREW), `a handler threw for ${frame.subarray(0, 120).toString("hex")}`);
}

const scalar = fc.oneof(fc.string({ maxLength: 40 }), fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.uint8Array({ maxLength: 40 }));
const value = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: "small" }, scalar, fc.array(tie("v"), { maxLength: 4 }), fc.dictionary(fc.string({ maxLength: 12 }), tie("v"), { maxKeys: 4 })),
})).v;
const fieldNames = fc.constantFrom("id", "jid", "fun", "fun_args", "return", "retcode", "tgt", "tgt_type", "data", "tag", "events", "pretag", "grains", "saltenv", "path", "loc", "clear", "sig", "ts", "nonce", "env_only", "expr_form", "arg", "kwargs", "prefix", "ver", "pillar_override", "extra_minion_data", "gzip");
const load = fc.record({
  cmd: fc.oneof(fc.constantFrom(...AES_FUNCS.keys()), fc.string({ maxLength: 16 })),
  id: fc.oneof(fc.constant("fz"), fc.string({ maxLength: 20 })),
  extra: fc.dictionary(fieldNames, value, { maxKeys: 6 }),
});

test("random bytes get exactly one reply", async () => {
  await fc.assert(fc.asyncProperty(fc.uint8Array({ maxLength: 300 }), (b) => oneReply(Buffer.from(b))), { numRuns: 300 });
});

test("random msgpack envelopes get exactly one reply", async () => {
  const env = fc.record({ enc: fc.oneof(fc.constantFrom("aes", "clear", "pub"), value), load: value, version: fc.oneof(fc.integer({ min: -1, max: 5 }), value), id: fc.oneof(fc.constant("fz"), value) }, { requiredKeys: [] });
  await fc.assert(fc.asyncProperty(env, (e) => oneReply(packSalt(e))), { numRuns: 300 });
});

test("well-formed v3 and v2 envelopes with random loads for every AES command get exactly one reply", async () => {
  const session = ctx.sessions.get("fz").key;
  await fc.assert(
    fc.asyncProperty(load, fc.boolean(), fc.boolean(), async (l, v3, withTok) => {
      const inner: Record<string, unknown> = { ...l.extra, cmd: l.cmd, id: l.id, nonce: newNonce() };
      if (v3) {
        inner.ts = Math.floor(Date.now() / 1000);
        if (withTok) inner.tok = keys.tok;
      }
      const c = new Crypticle(v3 ? session : aesKey);
      const envelope = v3 ? { enc: "aes", load: sealSalt(c, inner), version: 3, id: l.id, enc_algo: "OAEP-SHA1", sig_algo: "PKCS1v15-SHA1" } : { enc: "aes", load: sealSalt(c, inner), version: 2 };
      await oneReply(packSalt(envelope));
    }),
    { numRuns: 200 },
  );
});

test("random _auth loads get exactly one reply", async () => {
  const auth = fc.record({ cmd: fc.constant("_auth"), id: fc.oneof(fc.constant("fz"), fc.string({ maxLength: 20 })), pub: fc.oneof(fc.constant(keys.pub), fc.string({ maxLength: 60 }), value), token: value, nonce: fc.oneof(fc.constant("0".repeat(32)), value), enc_algo: value, sig_algo: value, autosign_grains: value }, { requiredKeys: ["cmd", "id"] });
  await fc.assert(fc.asyncProperty(auth, fc.integer({ min: 0, max: 3 }), (a, version) => oneReply(packSalt({ enc: "clear", load: a, version }))), { numRuns: 150 });
});

test("the clear size bound is for the request port: a padded clear request from it is refused unread, one the HTTP API built (with a source) is judged", async () => {
  const padded = packSalt({ enc: "clear", load: { cmd: "publish", tgt: "*", fun: "test.ping", arg: ["x".repeat(ctx.clearRequestBytesMax)], key: "wrong" }, version: 3 });
  const fromPort = decodeWire(await handleRequest(ctx, padded, newEffects()));
  assert.deepEqual(fromPort, { msg: "bad load" });
  const fromApi = decodeWire(await handleRequest(ctx, padded, newEffects(), "http:127.0.0.1"));
  assert.notDeepEqual(fromApi, { msg: "bad load" });
});
