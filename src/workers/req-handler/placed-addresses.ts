/**
 * The grains presence matches connections against (`ipv4`, `ipv6`: presence.ts, `brine_presence: connections`)
 * while `grains` is placed on a ring: a master holds the data of the minions it owns, but minions connected to it
 * may be any. The addresses of the ids it holds no data for are asked of the other masters in one question (only
 * those two grains travel: addressesOnly) and kept per thread for addressesKeepMs, so the presence pass and a
 * publish's "[Not connected]" look-up cost at most one question per ten seconds, not one per minion.
 */
import { clusterRecords } from "../../lib/targeting/cluster.js";
import type { MasterContext } from "./context.js";

/** how long a thread keeps the addresses it was told, ms */
export const addressesKeepMs = 10_000;
/** ids a thread keeps addresses of at most (the whole table is dropped past it), count */
export const addressesKeptMax = 200_000;

type Grains = Record<string, unknown> | undefined;

export class PlacedAddresses {
  private kept = new Map<string, { g: Grains; at: number }>();

  constructor(private readonly ctx: MasterContext) {}

  /** A look-up of the grains of `ids` that presence may use: this master's data, else the cluster's addresses. */
  async lookup(ids: readonly string[]): Promise<(id: string) => Grains> {
    const ctx = this.ctx;
    const local = (id: string) => ctx.minionCache.get(id)?.grains as Grains;
    const cluster = ctx.clusterMinions;
    if (!cluster || !cluster.placed("data")) return local;
    const now = ctx.now();
    const ask = ids.filter((id) => local(id) === undefined && !(now - (this.kept.get(id)?.at ?? -Infinity) < addressesKeepMs));
    if (ask.length > 0) {
      const got = await clusterRecords("data", ask, () => undefined, cluster, true);
      if (this.kept.size + ask.length > addressesKeptMax) this.kept = new Map();
      for (const id of ask) this.kept.set(id, { g: got.get(id)?.grains as Grains, at: now });
    }
    return (id) => local(id) ?? this.kept.get(id)?.g;
  }
}
