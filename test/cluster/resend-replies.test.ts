/**
 * The `cl/reply` exchange between masters (src/main-thread/cluster/resend-replies.ts), over an in-memory channel:
 * a master holding a copy asks every master it sees up for the reply the first copy got; the first non-empty
 * answer wins; nothing (empty answers, errors, a master of an older version, no peer up) is undefined; a key that
 * is not a nonce and a tag is refused.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { isBrineError } from "../../src/shared/errors.js";
import { REPLY_CHANNEL, ResendReplies, type ResendChannel } from "../../src/main-thread/cluster/resend-replies.js";
import type { PeerHandler } from "../../src/workers/raft/peer/peer-types.js";

const KEY = "ab".repeat(32);

/** masters by id, each a ResendReplies over one shared in-memory channel; `up` is who each sees up */
function cluster(recalls: Record<string, (key: string) => Promise<Uint8Array | undefined>>, up: Record<string, string[]>, broken: string[] = []) {
  const handlers = new Map<string, PeerHandler>();
  const masters: Record<string, ResendReplies> = {};
  for (const id of Object.keys(recalls)) {
    const view: ResendChannel = {
      upPeers: () => up[id] ?? [],
      on: (channel, h) => {
        assert.equal(channel, REPLY_CHANNEL);
        handlers.set(id, h);
        return () => handlers.delete(id);
      },
      request: async (peer, channel, payload) => {
        assert.equal(channel, REPLY_CHANNEL);
        if (broken.includes(peer)) throw new Error(`${peer} has no handler for ${channel}`);
        const r = await handlers.get(peer)!({ from: id, channel, payload } as never);
        return r ?? new Uint8Array(0);
      },
    };
    masters[id] = new ResendReplies(view, recalls[id]!, 1000);
  }
  return { masters, handlers };
}

const bytes = (s: string) => new Uint8Array(Buffer.from(s));
const text = (r: Uint8Array | undefined) => (r ? Buffer.from(r).toString() : undefined);

test("a copy on another master gets the reply of the master that remembers it; nobody remembering it is undefined", async () => {
  const slowly = (v: Uint8Array | undefined, ms: number) => () => new Promise<Uint8Array | undefined>((r) => setTimeout(() => r(v), ms));
  const rows: { name: string; recalls: Record<string, (k: string) => Promise<Uint8Array | undefined>>; up?: string[]; broken?: string[]; expect: string | undefined }[] = [
    { name: "the one that answered it remembers", recalls: { m2: async () => bytes("first"), m3: async () => undefined }, expect: "first" },
    { name: "it answers after the others said nothing (its first was in flight)", recalls: { m2: slowly(bytes("late"), 50), m3: async () => undefined }, expect: "late" },
    { name: "nobody remembers it", recalls: { m2: async () => undefined, m3: async () => undefined }, expect: undefined },
    { name: "a master of an older version (no handler) counts as nothing", recalls: { m2: async () => bytes("first"), m3: async () => undefined }, broken: ["m2"], expect: undefined },
    { name: "no other master is up", recalls: { m2: async () => bytes("first"), m3: async () => bytes("first") }, up: [], expect: undefined },
  ];
  for (const r of rows) {
    const { masters } = cluster({ m1: async () => undefined, ...r.recalls }, { m1: r.up ?? ["m2", "m3"] }, r.broken);
    assert.equal(text(await masters.m1!.ask(KEY)), r.expect, r.name);
  }
});

test("the key a master is asked about reaches its memory as sent; anything but a nonce and a tag is refused", async () => {
  const asked: string[] = [];
  const { handlers } = cluster({ m1: async () => undefined, m2: async (k) => (asked.push(k), bytes("r")) }, { m1: ["m2"] });
  const h = handlers.get("m2")!;
  assert.equal(text((await h({ from: "m1", channel: REPLY_CHANNEL, payload: Buffer.from(KEY) } as never)) as Uint8Array), "r");
  assert.deepEqual(asked, [KEY]);
  for (const bad of ["", "ab", "AB".repeat(32), "zz".repeat(32), "ab".repeat(33)]) {
    await assert.rejects(async () => h({ from: "m1", channel: REPLY_CHANNEL, payload: Buffer.from(bad) } as never), (e: unknown) => isBrineError(e, "RESEND_BAD_ASK"), JSON.stringify(bad));
  }
  assert.deepEqual(asked, [KEY]);
});

test("copies of one request asked about at once share one ask per master; a later copy asks again", async () => {
  let asks = 0;
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const { masters } = cluster(
    { m1: async () => undefined, m2: async () => (asks++, await held, bytes("first")), m3: async () => (asks++, undefined) },
    { m1: ["m2", "m3"] },
  );
  const copies = Array.from({ length: 50 }, () => masters.m1!.ask(KEY));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(asks, 2, "one ask to each of the two other masters for 50 copies");
  release();
  assert.deepEqual((await Promise.all(copies)).map(text), Array(50).fill("first"));
  assert.equal(text(await masters.m1!.ask(KEY)), "first");
  assert.equal(asks, 4, "a copy after the answer asks again (what a master remembers may have changed)");
});
