/**
 * placement_check's and shed_unowned_all's questions to every master (src/workers/raft/held-jobs.ts) skip a
 * master the peer channel has no session with: its answer would only time out (20 s), past the runner's own
 * deadline for the Raft worker's answer (15 s), so one master down made placement_check, shed_unowned_all and
 * remove_member's outbox check fail as "outcome unknown" instead of naming the master that is down.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { HeldJobsService } from "../../src/workers/raft/held-jobs.js";
import { cbor } from "../../src/shared/cbor.js";

test("a master without a peer session is not asked: it is named down at once, the others answer", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-held-"));
  const asked: string[] = [];
  const channel = {
    on: () => () => undefined,
    // m3 is down: a request to it would wait for the timeout
    request: (peer: string) => {
      asked.push(peer);
      return peer === "m3" ? new Promise<Uint8Array>(() => undefined) : Promise.resolve(cbor.encode({ jids: ["20261126010000000001"], truncated: false, pending: 0 }) as Uint8Array);
    },
  };
  const svc = new HeldJobsService({ cachedir: dir, brine_lmdb_map_bytes: 64 * 1024 * 1024 }, channel, 20_000, "m1", () => ({ skip: "not a voter" }), (peer) => peer !== "m3");
  try {
    const t0 = Date.now();
    const r = await svc.ask(["m2", "m3"], 10);
    assert.ok(Date.now() - t0 < 5_000, "answered without waiting for m3");
    assert.deepEqual(r.m3, { error: "down (no peer session)" });
    assert.deepEqual(r.m2, { jids: ["20261126010000000001"], truncated: false, pending: 0 });
    assert.deepEqual(asked, ["m2"]);
    const shed = await svc.shedOn(["m3"], { ring: "jobs", banks: ["jobs/loads"], subbankTemplate: null, driver: null, dryRun: true });
    assert.equal(shed.m3!.status, "error");
    assert.equal(shed.m3!.error, "down (no peer session)");
  } finally {
    svc.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
