/** The minion data cache (grains + pillar per minion, for targeting) and mine data. */
import type { Store } from "./lmdb-env.js";

export interface MinionData {
  grains?: Record<string, unknown>;
  pillar?: Record<string, unknown>;
}

export class MinionCache {
  constructor(private readonly s: Store) {}

  get(id: string): MinionData | undefined {
    return this.s.minionData.get(id) as MinionData | undefined;
  }

  async put(id: string, data: MinionData): Promise<void> {
    await this.s.minionData.put(id, data);
  }

  async remove(id: string): Promise<void> {
    await Promise.all([this.s.minionData.remove(id), this.s.mine.remove(id)]);
  }

  mine(id: string): Record<string, unknown> | undefined {
    return this.s.mine.get(id);
  }

  async setMine(id: string, data: Record<string, unknown>): Promise<void> {
    await this.s.mine.put(id, data);
  }
}
