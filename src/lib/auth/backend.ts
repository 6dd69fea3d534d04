/**
 * The contract between the authorization core (`src/lib/auth/`, request workers) and an eauth backend
 * (`src/lib/auth/backends/<name>.ts`): Salt's `salt/auth/<name>.py` modules' `auth`, `groups`, `acl` and
 * `process_acl`, as one interface. A backend decides only "are these credentials valid" and "which groups
 * is this user in"; what the user may do is decided by the pure ACL module from `external_auth`.
 *
 * Backends run in request worker threads (the clear lane). They must never throw for bad credentials
 * (that is `false`); a failure of the backend itself (LDAP unreachable, helper missing) is thrown as a
 * BrineError("EAUTH_BACKEND", detail) and the core counts it as a refusal and logs it. Every network or
 * child-process call has its own timeout (a slow directory must not hold the lane for long).
 */
import type { MasterConfig } from "../../shared/config/defaults.js";

/** What a client sent with its request (Salt's `_valid` keys of LoadAuth.__auth_call, plus the rest of the load). */
export interface EauthCredentials {
  username: string;
  password?: string;
  /** the whole clear load or publish kwargs the credentials came in (sharedsecret reads `password` only) */
  load?: Record<string, unknown>;
}

export interface EauthBackend {
  /** the name operators write in `external_auth` and send as `eauth` ("file", "ldap", "pam", "sharedsecret", "auto") */
  readonly name: string;
  /** true when the credentials are valid; never throws for bad credentials */
  authenticate(creds: EauthCredentials): Promise<boolean>;
  /** the user's groups as the backend knows them (matched against `name%` entries of external_auth) */
  groups?(creds: EauthCredentials): Promise<string[]>;
  /** an ACL the backend provides itself (Salt's `<mod>.acl`); undefined: use `external_auth` */
  acl?(creds: EauthCredentials): Promise<unknown[] | undefined>;
  /** Salt's `<mod>.process_acl`: rewrite the compiled auth list (ldap expands `ldap(...)` entries) */
  processAcl?(authList: unknown[]): Promise<unknown[]>;
}

export type EauthBackendFactory = (cfg: MasterConfig) => EauthBackend;
