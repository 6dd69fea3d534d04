/**
 * The `sharedsecret` eauth backend: Salt's salt/auth/sharedsecret.py. Any username; the password must
 * equal the master option `sharedsecret` (compared in constant time). Meant, as in Salt, for a front end
 * that authenticates users itself (Kerberos, SSO) and passes the secret on, over localhost.
 *
 * When external_auth names sharedsecret, `sharedsecret` must be a non-empty string (CONFIG_INVALID
 * otherwise: Salt would compare against None and refuse everyone, silently); a secret shorter than
 * sharedSecretCharsWarn is accepted with a warning at start.
 */
import type { MasterConfig } from "../../../shared/config/defaults.js";
import { getLogger, type Logger } from "../../../shared/log.js";
import type { EauthBackend, EauthCredentials } from "../backend.js";
import { checkCredentials, OptionReader, safeEqual } from "./common.js";

/** a secret shorter than this, characters, is logged as weak at start */
export const sharedSecretCharsWarn = 16;

export class SharedSecretEauthBackend implements EauthBackend {
  readonly name = "sharedsecret";
  constructor(private readonly secret: string, private readonly log: Logger = getLogger("brine.auth.sharedsecret")) {}

  async authenticate(creds: EauthCredentials): Promise<boolean> {
    const c = checkCredentials(this.name, creds, this.log);
    if (!c) return false;
    const ok = safeEqual(c.password, this.secret);
    if (!ok) this.log.debug(`eauth sharedsecret: wrong secret from ${JSON.stringify(c.username)}`);
    return ok;
  }
}

function readSecret(cfg: MasterConfig): string {
  return OptionReader.top(cfg).required("sharedsecret", "when external_auth names sharedsecret");
}

export function makeSharedSecretBackend(cfg: MasterConfig, log: Logger = getLogger("brine.auth.sharedsecret")): SharedSecretEauthBackend {
  return new SharedSecretEauthBackend(readSecret(cfg), log);
}

/** the start warning of a short secret */
export function sharedSecretStartWarnings(cfg: MasterConfig): string[] {
  return readSecret(cfg).length < sharedSecretCharsWarn
    ? [`sharedsecret is shorter than ${sharedSecretCharsWarn} characters: anyone who guesses it is any user external_auth:sharedsecret names`]
    : [];
}
