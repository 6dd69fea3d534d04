/**
 * Every eauth backend brine provides, built from the master configuration.
 *
 * makeEauthBackends(cfg) returns one backend per name of EAUTH_BACKEND_NAMES. A backend that
 * `external_auth` names is built by its factory, which validates its options and throws
 * BrineError("CONFIG_INVALID", "<option>: <why>") at start. A backend that external_auth does not name
 * is not configured (its options are not read): the map holds a stand-in that refuses every login with a
 * log line, so a client sending `eauth: ldap` to a master without ldap gets a refusal, not a crash.
 *
 * warnAboutDangerousBackends(cfg, log) is for the master to call once at start (beside makeEauthBackends,
 * which reports invalid options; this never throws): it logs a loud warning when external_auth names `auto` (every
 * password accepted), one for each external_auth name brine has no backend for (Salt's django, rest,
 * keystone, ...: those users cannot log in), and what the named backends' options weaken (a short
 * sharedsecret, auth.ldap.no_verify, a pam service PAM does not have, ...). It returns the warnings it
 * logged. The factories themselves log nothing at start, so building the backends in every request
 * worker does not repeat these lines.
 */
import type { MasterConfig } from "../../../shared/config/defaults.js";
import { getLogger, type Logger } from "../../../shared/log.js";
import type { EauthBackend, EauthCredentials } from "../backend.js";
import { makeAutoBackend } from "./auto.js";
import { externalAuth } from "./common.js";
import { makeFileBackend } from "./file.js";
import { ldapStartWarnings, makeLdapBackend } from "./ldap.js";
import { makePamBackend, pamStartWarnings } from "./pam.js";
import { makeSharedSecretBackend, sharedSecretStartWarnings } from "./sharedsecret.js";

type Factory = (cfg: MasterConfig, log?: Logger) => EauthBackend;

const FACTORIES: Record<string, Factory> = {
  file: makeFileBackend,
  sharedsecret: makeSharedSecretBackend,
  auto: makeAutoBackend,
  ldap: makeLdapBackend,
  pam: makePamBackend,
};

/** what a backend's valid options say at start that weakens security or will not work (logged once, by the master) */
const START_WARNINGS: Record<string, (cfg: MasterConfig) => string[]> = {
  sharedsecret: sharedSecretStartWarnings,
  ldap: ldapStartWarnings,
  pam: pamStartWarnings,
};

/** the names operators may write under external_auth and clients send as `eauth` */
export const EAUTH_BACKEND_NAMES: readonly string[] = Object.freeze(Object.keys(FACTORIES));

/** a backend external_auth does not name: refuses everyone, says why */
class UnconfiguredBackend implements EauthBackend {
  constructor(readonly name: string, private readonly log: Logger) {}
  async authenticate(creds: EauthCredentials): Promise<boolean> {
    const who = typeof creds?.username === "string" ? JSON.stringify(creds.username.slice(0, 64)) : "<no username>";
    this.log.warning(`eauth ${this.name}: refused ${who}: external_auth does not name ${this.name}`);
    return false;
  }
}

export function makeEauthBackends(cfg: MasterConfig, log?: Logger): Map<string, EauthBackend> {
  const enabled = externalAuth(cfg);
  const out = new Map<string, EauthBackend>();
  for (const [name, factory] of Object.entries(FACTORIES)) {
    const l = log ?? getLogger(`brine.auth.${name}`);
    out.set(name, Object.hasOwn(enabled, name) ? factory(cfg, l) : new UnconfiguredBackend(name, l));
  }
  return out;
}

export function warnAboutDangerousBackends(cfg: MasterConfig, log: Logger = getLogger("brine.auth")): string[] {
  const said: string[] = [];
  const say = (m: string) => {
    said.push(m);
    log.warning(m);
  };
  const names = Object.keys(externalAuth(cfg));
  if (names.includes("auto")) {
    say(
      "*** external_auth names the `auto` backend: EVERY username is accepted with ANY password (Salt's test-only " +
        "backend). Anyone who can reach this master's request port or API gets the rights external_auth:auto grants. " +
        "Remove it outside of tests. ***",
    );
  }
  for (const n of names) {
    if (Object.hasOwn(START_WARNINGS, n)) {
      let warnings: string[] = [];
      try {
        warnings = START_WARNINGS[n](cfg);
      } catch {
        // invalid options are makeEauthBackends' to report (CONFIG_INVALID); nothing to warn about here
      }
      for (const m of warnings) say(m);
    }
    if (!Object.hasOwn(FACTORIES, n)) say(`external_auth names the eauth backend ${JSON.stringify(n)}, which brine does not provide (it has: ${EAUTH_BACKEND_NAMES.join(", ")}): its users cannot log in`);
  }
  return said;
}
