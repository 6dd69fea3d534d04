/**
 * Which master of a cluster acts on a key (an event's reactions, a scheduled job's fire): the first live master
 * in the ring's preference order for the key (the ring "cluster", src/shared/sab-ring: owner, then rendezvous
 * order), where live means this master or a peer whose peer-channel session is up on the peer-health board.
 * So each event reacts once cluster-wide, and when the owner dies the next master in the order takes over as
 * soon as its session is seen down. Before the ring is published (the cluster's first seconds), the live masters
 * ranked by a hash of (key, id) decide: then a master whose peers' sessions are not up yet acts alone, so an
 * event in those seconds may react on more than one master (a scheduled fire is skipped instead, thread.ts). Two masters that disagree for a moment about who is up (a session
 * going down on one side first) may both act, or neither, for events in that moment.
 */
import { readHealth } from "../shared/peer-health.js";
import { hashString } from "../shared/sab-ring/hash.js";
import type { RingReader } from "../shared/sab-ring/reader.js";

export interface OwnerSources {
  self: string;
  ring: RingReader;
  health?: SharedArrayBuffer;
}

export function liveMasters(s: OwnerSources): Set<string> {
  const live = new Set([s.self]);
  const board = s.health ? readHealth(s.health) : undefined;
  for (const [id, e] of Object.entries(board?.peers ?? {})) if (e.up) live.add(id);
  return live;
}

/** The master that acts on `key` now. */
export function ownerOf(key: string, s: OwnerSources): string {
  const live = liveMasters(s);
  const order = s.ring.replicas(key, s.ring.nodes().length);
  for (const id of order) if (live.has(id)) return id;
  let best = s.self;
  let bestHash = -1;
  for (const id of live) {
    const h = hashString(`${key}\0${id}`) >>> 0;
    if (h > bestHash || (h === bestHash && id < best)) {
      best = id;
      bestHash = h;
    }
  }
  return best;
}
