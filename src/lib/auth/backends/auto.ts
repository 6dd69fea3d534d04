/**
 * The `auto` eauth backend: Salt's salt/auth/auto.py, "an Always Approved eauth interface to test
 * against, not intended for production use". Every username with any password (or none) is accepted;
 * what it may do is still limited by external_auth:auto. The master warns loudly at start when
 * external_auth names it (warnAboutDangerousBackends in ./index.ts).
 *
 * The username is still checked (a string, non-empty, no control characters): it lands in logs, tokens
 * and ACL matching.
 */
import { getLogger, type Logger } from "../../../shared/log.js";
import type { EauthBackend, EauthCredentials } from "../backend.js";
import { checkCredentials } from "./common.js";

export class AutoEauthBackend implements EauthBackend {
  readonly name = "auto";
  constructor(private readonly log: Logger = getLogger("brine.auth.auto")) {}

  async authenticate(creds: EauthCredentials): Promise<boolean> {
    const c = checkCredentials(this.name, creds, this.log, { emptyPasswordOk: true });
    if (!c) return false;
    this.log.info(`eauth auto: approved ${JSON.stringify(c.username)} without checking a password`);
    return true;
  }
}

export function makeAutoBackend(_cfg: unknown, log?: Logger): AutoEauthBackend {
  return new AutoEauthBackend(log);
}
