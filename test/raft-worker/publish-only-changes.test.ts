/**
 * The pump publishes rings and routes to the shared buffer only when an applied entry changed what it
 * publishes: a ROUTE that restates a route applies (it moves Salt's routing_version) and leaves the buffer and
 * its writer alone; a ROUTE that changes a route, a new data type and a RING_REGISTRY entry are published
 * before their callers are answered, as ever.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MemoryBackend } from "../../src/workers/raft/backend.js";
import { GroupManager, type RingSink } from "../../src/workers/raft/manager.js";
import { createRingBuffer } from "../../src/shared/sab-ring/layout.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { RingWriter, type RingTarget } from "../../src/shared/sab-ring/writer.js";
import { TEST_LIMITS } from "./harness.js";

test("a ROUTE that restates a route publishes nothing; one that changes it, a new data type and a ring registered are published before their answers", async () => {
  const writer = RingWriter.attach(createRingBuffer());
  const reader = new RingReader(writer.buffer);
  let publishes = 0;
  const ring: RingSink = {
    sync: (targets: ReadonlyMap<string, RingTarget>) => {
      publishes++;
      return writer.sync(targets);
    },
    publishRoutes: (routes: ReadonlyMap<string, string | null>) => writer.publishRoutes(routes),
  };
  const m = new GroupManager({ self: "solo", backend: new MemoryBackend(), ring, limits: TEST_LIMITS });
  try {
    assert.equal(await m.bootstrap(["solo"]), true);
    await m.start();
    const route = (data_type: string, ring_id: string | null) => m.propose("cluster", { kind: "ROUTE", value: { data_type, ring_id } });
    const published = async (what: string, p: Promise<{ applied: string }>) => {
      const before = publishes;
      assert.equal((await p).applied, "applied", what);
      return publishes - before;
    };
    assert.equal(await published("a new data type", route("grains", null)), 1);
    assert.ok("grains" in reader.routes());
    for (let i = 0; i < 5; i++) assert.equal(await published("the same route again", route("grains", null)), 0);
    assert.equal(await published("the route pointed at a ring", route("grains", "cluster")), 1);
    assert.equal(reader.routes().grains, "cluster", "the changed route is in the buffer when its caller is answered");
    assert.equal(await published("the same again", route("grains", "cluster")), 0);
    assert.equal(await published("back to None", route("grains", null)), 1);
    assert.equal(reader.routes().grains, null);
    // the registry entry, then the ring's own group started here: both published
    assert.ok((await published("a ring registered", m.propose("cluster", { kind: "RING_REGISTRY", value: { ring_id: "r-a", founding_voters: ["solo"] } }))) >= 1);
    await m.idle();
    assert.ok(reader.rings().includes("r-a"), "the hosted ring is in the buffer");
  } finally {
    await m.close();
  }
});
