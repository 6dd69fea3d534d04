/** The bus stream reader yields every event exactly once, whatever the chunk boundaries. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventStreamReader, packEvent } from "../../src/shared/event-frame.js";

test("every split point of a three-event stream yields the three events once, in order", () => {
  const frames = [packEvent("j", { minions: ["a"] }), packEvent("salt/job/j/new", { a: 1, blob: Buffer.alloc(300, 0xff) }), packEvent("salt/job/j/publish", { b: "x".repeat(70) })];
  const all = Buffer.concat(frames);
  for (let cut = 1; cut < all.length; cut++) {
    for (const second of [cut + 1, cut + 37, all.length]) {
      const r = new EventStreamReader();
      const got = [...r.push(all.subarray(0, cut)), ...r.push(all.subarray(cut, second)), ...r.push(all.subarray(second))];
      assert.deepEqual(got.map((e) => e.tag), ["j", "salt/job/j/new", "salt/job/j/publish"], `cut at ${cut}/${second}`);
      assert.deepEqual(got[1]!.data.blob, Buffer.alloc(300, 0xff));
    }
  }
});
