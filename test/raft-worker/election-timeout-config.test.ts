/**
 * cluster_election_min/max (Salt 3008's names, ms) become the Raft worker's election timeout in ticks: the
 * timeout is drawn in [min, 2 × min), so the only upper end taken is twice the lower; anything else stops the
 * start with a message naming the option.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { electionTicksOf } from "../../src/workers/raft/limits.js";

test("election timeouts in ms become whole ticks of 50 ms, kept above the one-tick heartbeat", () => {
  const cases: [Record<string, unknown>, number | undefined][] = [
    [{}, undefined],
    [{ cluster_election_min: 500 }, 10],
    [{ cluster_election_min: 750, cluster_election_max: 1500 }, 15],
    [{ cluster_election_max: 600 }, 6],
    [{ cluster_election_min: 250 }, 5],
    [{ cluster_election_min: 120 }, 2],
    [{ cluster_election_min: 60 }, 2],
  ];
  for (const [cfg, ticks] of cases) assert.equal(electionTicksOf(cfg), ticks, JSON.stringify(cfg));
  assert.equal(electionTicksOf({ cluster_election_min: 500 }, 10), 50, "in ticks of the given length");
});

test("an upper end other than twice the lower one is refused, naming the option and the value it must have", () => {
  assert.throws(() => electionTicksOf({ cluster_election_min: 150, cluster_election_max: 300 + 1 }), (e: Error & { code?: string }) => e.code === "CONFIG_INVALID" && /cluster_election_max.*must be 300/.test(e.message));
  assert.throws(() => electionTicksOf({ cluster_election_min: "fast" }), (e: Error & { code?: string }) => e.code === "CONFIG_INVALID" && /cluster_election_min/.test(e.message));
});
