/**
 * Salt's check_minion_cache: once a minion has no key in any state (salt-key -d, with the master running
 * or stopped), its cached grains and pillar, mine data and session key go too, unless
 * `preserve_minion_cache`. Run by the background cleanup in a request worker; clustered, the removals
 * travel to the peers as tombstones (minion-cache.ts), and each master drops its own session file.
 */
import { readdirSync, rmSync } from "node:fs";
import path from "node:path";
import { validId } from "../../shared/protocol/ids.js";
import type { KeyState } from "../../lib/pki/key-store.js";
import type { MasterContext } from "./context.js";

/** minions purged per pass at most (the next pass takes the rest), count */
export const keylessPurgePerPassMax = 10_000;
const KEY_STATES: KeyState[] = ["accepted", "pending", "rejected", "denied"];

/** Remove the cached data of minions with no key; returns how many minions were purged. */
export async function purgeKeylessMinions(ctx: MasterContext, max = keylessPurgePerPassMax): Promise<number> {
  if (ctx.cfg.preserve_minion_cache || ctx.cfg.open_mode) return 0;
  const known = new Set<string>();
  for (const s of KEY_STATES) for (const id of ctx.keys.list(s)) known.add(id);
  const gone = new Set<string>();
  for (const db of [ctx.store.minionData, ctx.store.mine]) {
    for (const id of db.getKeys()) {
      if (gone.size >= max) break;
      if (!known.has(id)) gone.add(id);
    }
  }
  // a minion may have signed in since the listing: look at its key files once more before removing
  const hasKey = (id: string) => KEY_STATES.some((s) => ctx.keys.exists(s, id));
  for (const id of gone) if (hasKey(id)) gone.delete(id);
  await Promise.all([...gone].map((id) => ctx.minionCache.remove(id)));
  let sessions: string[] = [];
  try {
    sessions = readdirSync(ctx.sessions.dir);
  } catch {
    // no sessions directory yet
  }
  let purged = gone.size;
  for (const name of sessions) {
    if (purged >= max) break;
    // only minion ids: temp files of a key being written (<id>.<pid>.<rand>.tmp) contain dots after the id
    if (!validId(name) || known.has(name) || name.endsWith(".tmp") || hasKey(name)) continue;
    rmSync(path.join(ctx.sessions.dir, name), { force: true });
    if (!gone.has(name)) purged++;
  }
  // a new minion taking a deleted one's id may be a v2 one: the v3 mark goes with the key
  ctx.v3Marks.purge((id) => known.has(id) || hasKey(id), max);
  return purged;
}
