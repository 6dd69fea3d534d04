/** Salt's wheel `minions` module: `minions.connected`, the ids of the minions connected to this master (sorted). */
import { wheelModule } from "./define.js";

export const MINIONS_FUNCTIONS = wheelModule("minions", {
  connected: {
    params: [],
    run: async (ctx) => [...new Set(await ctx.connectedIds())].sort(),
  },
});
