/**
 * The authorization checks a master makes once, on the main thread, before it serves: options valid
 * (a bad value stops the start naming the option), the options of every backend `external_auth` names
 * valid, loud warnings for what weakens security (the `auto` backend, names brine has no backend for,
 * permissive_acl, entries Salt would match as prefixes, in external_auth and in peer/peer_run), and a CLI key for every local user in
 * `publisher_acl` (Salt's access_keys: `cachedir/.<user>_key`, readable by that user alone).
 */
import { chownSync } from "node:fs";
import { userInfo } from "node:os";
import { execFileSync } from "node:child_process";
import type { MasterConfig } from "../shared/config/defaults.js";
import type { Logger } from "../shared/log.js";
import { ensureRootKey, rootKeyPath } from "../lib/pki/root-key.js";
import { prefixOnlyEntries } from "../lib/auth/acl.js";
import { prefixOnlyPeerKeys } from "../lib/auth/peer-acl.js";
import { makeEauthBackends, warnAboutDangerousBackends } from "../lib/auth/backends/index.js";
import { authOptions } from "../lib/auth/options.js";

/** A local user's uid and gid (`id -u/-g`), or undefined when there is no such user. */
function uidGid(user: string): { uid: number; gid: number } | undefined {
  try {
    const uid = Number(execFileSync("id", ["-u", user], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", user], { encoding: "utf8" }).trim());
    return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : undefined;
  } catch {
    return undefined;
  }
}

export function prepareAuthorization(cfg: MasterConfig, log: Logger): void {
  const o = authOptions(cfg);
  makeEauthBackends(cfg); // each named backend's options checked now (CONFIG_INVALID), not at the first login
  warnAboutDangerousBackends(cfg, log); // `auto`, and names brine has no backend for
  if (o.permissive_acl) log.warning("permissive_acl: True: '*' entries of external_auth apply to every user, named or not");
  const narrow = prefixOnlyEntries(o.external_auth);
  if (narrow.length) {
    log.warning(`external_auth entries ${narrow.map((n) => JSON.stringify(n)).join(", ")} match whole function names in brine; Salt matches them as prefixes (e.g. '${narrow[0]}' would allow '${narrow[0]}.anything'): write '${narrow[0]}.*' for that`);
  }
  for (const option of ["peer", "peer_run"] as const) {
    const keys = prefixOnlyPeerKeys(cfg[option]);
    if (keys.length) {
      log.warning(`${option}: keys ${keys.map((k) => JSON.stringify(k)).join(", ")} match whole minion ids in brine; Salt matches them as prefixes ('${keys[0]}' would also give '${keys[0]}0' its rights): write '${keys[0]}.*' for that`);
    }
  }
  const peerFuns = prefixOnlyEntries({ peer: cfg.peer });
  if (peerFuns.length) {
    log.warning(`peer: entries ${peerFuns.map((n) => JSON.stringify(n)).join(", ")} match whole function names in brine; Salt matches them as prefixes: write '${peerFuns[0]}.*' for that`);
  }
  const me = userInfo().username;
  for (const user of Object.keys(o.publisher_acl)) {
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(user)) continue; // a pattern, not a user: no key file to make
    ensureRootKey(cfg.cachedir, user);
    if (user !== me && process.getuid?.() === 0) {
      const ids = uidGid(user);
      if (ids) chownSync(rootKeyPath(cfg.cachedir, user), ids.uid, ids.gid);
      else log.warning(`publisher_acl: no local user ${JSON.stringify(user)}; its key file is kept by ${me}`);
    }
  }
}
