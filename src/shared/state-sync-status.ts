/**
 * Reading the state-sync thread's status file (`cachedir/brine-state-sync/status.json`, written by
 * src/workers/state-sync/engine.ts) for the threads that show it: `cluster.health` and `brine.stats` in the
 * runner thread, the metrics endpoint on the main thread. The content is checked by the pure
 * src/shared/cluster-health.ts (checkStateSyncStatus).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { getLogger } from "./log.js";
import { checkStateSyncStatus, type HealthFacts } from "./cluster-health.js";

const log = getLogger("brine.state-sync-status");

/** Where the state-sync thread reports its transfers per channel and peer. */
export function stateSyncStatusFile(cachedir: string): string {
  return path.join(cachedir, "brine-state-sync", "status.json");
}

/** The state-sync status file: undefined when absent, else its checked content or what is wrong with it. */
export function readStateSyncStatus(cachedir: string): HealthFacts["stateSync"] {
  const file = stateSyncStatusFile(cachedir);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    return { error: `${file}: ${(e as Error).message}` };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    return { error: `${file}: not JSON (${(e as Error).message})` };
  }
  const checked = checkStateSyncStatus(parsed);
  if ("error" in checked) log.warning(`${file}: ${checked.error}`);
  return "error" in checked ? { error: `${file}: ${checked.error}` } : checked;
}
