/**
 * pki.* runners (Salt 3009's salt/runners/pki.py): `migrate_to_mmap(dry_run=False)` copies the localfs_key
 * layout into the indexed key store (src/lib/pki/key-migrate.ts), `status()` is its dry run. Both answer
 * Salt's report text. The store written is the one `keys.cache_driver: mmap_key` reads (the minion pki dir's
 * `brine-keys/`), whichever driver this master runs now: migrate, then switch the driver and restart.
 */
import { getLogger } from "../shared/log.js";
import { BrineError } from "../shared/errors.js";
import { onNetworkFs } from "../shared/shared-fs.js";
import { pyTruthy } from "../lib/wheel/salt-errors.js";
import { KeyStore } from "../lib/pki/key-store.js";
import { migrateReport, migrateToIndexed, skipsLoggedMax } from "../lib/pki/key-migrate.js";
import { argOf, type RunnerContext, type RunnerFn } from "./context.js";

const log = getLogger("brine.runner.pki");

function migrate(ctx: RunnerContext, dryRun: boolean): string {
  const dir = ctx.keys.pkiDir;
  // the store the master would refuse to start on is not made either
  if (!dryRun && onNetworkFs(dir)) throw new BrineError("KEYS_STORE_NETWORK_FS", `${dir} (the indexed key store needs a local disk; keys stay in their files)`);
  const db = dryRun ? undefined : new KeyStore(dir, "mmap_key").indexed();
  let logged = 0;
  const counts = migrateToIndexed(dir, db, dryRun, {
    skipped: (file, reason) => {
      if (logged++ < skipsLoggedMax) log.warning(`pki.migrate_to_mmap: skipping ${file}: ${reason}`);
    },
  });
  if (counts.skipped > skipsLoggedMax) log.warning(`pki.migrate_to_mmap: ${counts.skipped - skipsLoggedMax} more entries skipped`);
  if (!dryRun) log.info(`pki.migrate_to_mmap: accepted ${counts.accepted}, pending ${counts.pending}, rejected ${counts.rejected}, denied ${counts.denied}, skipped ${counts.skipped}`);
  return migrateReport(counts, dryRun);
}

export const pkiRunners: Record<string, RunnerFn> = {
  "pki.migrate_to_mmap": async (ctx, arg, kwarg) => migrate(ctx, pyTruthy(argOf(arg, kwarg, 0, "dry_run", false))),
  "pki.status": async (ctx) => migrate(ctx, true),
};
