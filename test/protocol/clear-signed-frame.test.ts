import { test } from "node:test";
import assert from "node:assert/strict";
import { clearSignedFrame } from "../../src/workers/req-handler/auth.js";
import { decodeWire, encodeWire } from "../../src/shared/protocol/msgpack.js";

test("a signed clear reply's frame is byte for byte what packing {enc, load, sig} gives, for every bin header size", () => {
  for (const [loadBytes, sigBytes] of [[10, 256], [255, 255], [256, 512], [70_000, 256], [1_500, 0]] as const) {
    const tosign = Buffer.alloc(loadBytes, 7);
    const sig = Buffer.alloc(sigBytes, 9);
    const frame = clearSignedFrame(tosign, sig);
    assert.equal(Buffer.compare(frame, encodeWire({ enc: "clear", load: tosign, sig })), 0, `${loadBytes}/${sigBytes}`);
    const back = decodeWire(frame) as unknown as { enc: string; load: Uint8Array; sig: Uint8Array };
    assert.deepEqual(Object.keys(back), ["enc", "load", "sig"]);
    assert.equal(back.enc, "clear");
    assert.equal(Buffer.compare(Buffer.from(back.load), tosign), 0);
    assert.equal(Buffer.compare(Buffer.from(back.sig), sig), 0);
  }
});
