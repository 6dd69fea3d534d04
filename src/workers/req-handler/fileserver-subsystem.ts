/**
 * The fileserver subsystem: one roots and one gitfs backend per request-worker context, and the §5.3 AES commands
 * registered on the allow-list. Loaded by src/workers/req-handler/subsystems.ts.
 */
import { getLogger } from "../../shared/log.js";
import { registerAesFunc } from "./aes-funcs.js";
import type { MasterContext } from "./context.js";
import { addSubsystem } from "./subsystems.js";
import { FileserverHandlers } from "../../lib/fileserver/handlers.js";
import { GitfsBackend } from "../../lib/fileserver/gitfs.js";
import { backendNames, RootsBackend } from "../../lib/fileserver/roots.js";

export { RootsBackend, backendNames, type Found } from "../../lib/fileserver/roots.js";
export { GitfsBackend } from "../../lib/fileserver/gitfs.js";
export { FileserverHandlers, statList } from "../../lib/fileserver/handlers.js";

const log = getLogger("brine.fileserver");
const perContext = new WeakMap<MasterContext, FileserverHandlers>();

/** The fileserver of a context (created on first use). */
export function fileserverFor(ctx: MasterContext): FileserverHandlers {
  let h = perContext.get(ctx);
  if (!h) {
    h = new FileserverHandlers(new RootsBackend(ctx.cfg), new GitfsBackend(ctx.cfg), backendNames(ctx.cfg));
    perContext.set(ctx, h);
  }
  return h;
}

const send = (ret: unknown) => ({ ret, mode: "send" as const });
let topsWarned = false;

export function registerFileserver(): void {
  registerAesFunc("_file_envs", (ctx) => send(fileserverFor(ctx).fileEnvs()));
  registerAesFunc("_file_find", async (ctx, load) => send(await fileserverFor(ctx).fileFind(load)));
  registerAesFunc("_file_hash", async (ctx, load) => send(await fileserverFor(ctx).fileHash(load)));
  registerAesFunc("_file_hash_and_stat", async (ctx, load) => send(await fileserverFor(ctx).fileHashAndStat(load)));
  registerAesFunc("_serve_file", async (ctx, load) => send(await fileserverFor(ctx).serveFile(load)));
  registerAesFunc("_file_list", async (ctx, load) => send(await fileserverFor(ctx).fileList(load)));
  registerAesFunc("_dir_list", async (ctx, load) => send(await fileserverFor(ctx).dirList(load)));
  registerAesFunc("_file_list_emptydirs", async (ctx, load) => send(await fileserverFor(ctx).fileListEmptydirs(load)));
  registerAesFunc("_symlink_list", async (ctx, load) => send(await fileserverFor(ctx).symlinkList(load)));
  registerAesFunc("_master_tops", (ctx) => {
    const tops = ctx.cfg.master_tops;
    if (!topsWarned && tops && typeof tops === "object" && Object.keys(tops).length) {
      topsWarned = true;
      log.warning("master_tops is configured, but brine runs no master_tops modules; minions get no extra tops");
    }
    return send({});
  });
}

addSubsystem((ctx) => {
  registerFileserver();
  fileserverFor(ctx);
});
