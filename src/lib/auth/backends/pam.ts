/**
 * The `pam` eauth backend: Salt's salt/auth/pam.py. A local user's password is checked by PAM's
 * `authenticate` then `acct_mgmt` (Salt calls pam_authenticate then pam_acct_mgmt) for the service
 * `auth.pam.service` (Salt's default "login"); groups are the system's (`id -Gn`, which asks NSS as
 * Salt's os.getgrouplist does, so LDAP/sssd users' groups come too; the primary group is included).
 *
 * No native addon: PAM runs in a child process, Debian's `pamtester` (package pamtester, which .ci/run
 * installs): `pamtester <service> <user> authenticate acct_mgmt`, the password on its stdin, exit 0 on
 * success. Salt itself runs PAM in a child process (its module re-executed under the system Python), for
 * the same reason: the PAM stack's modules are not ours to load into the master. pamtester is small,
 * packaged by Debian, Ubuntu, Fedora and Alpine, and does exactly one conversation.
 *
 * Options: `auth.pam.service` (a PAM service name), brine's `auth.pam.helper` (the pamtester binary; the
 * default is looked up in /usr/bin, /usr/local/bin, /bin at start, and its absence stops the start naming
 * the option) and `auth.pam.timeout` (seconds per check, default 10: a failed check in Debian's `login`
 * service waits 3 s in pam_faildelay). A check that times out or whose helper cannot run is thrown as
 * BrineError("EAUTH_BACKEND"), as is a check beyond pamChecksRunningMax helpers at once and
 * pamChecksWaitingMax waiting (per request worker): a flood of logins must not fork without bound.
 *
 * What reaches the helper is checked first: the username cannot start with "-" (it would be read as an
 * option) and holds only letters, digits and `_ . @ \ $ -`; the password holds no line break (the helper
 * reads one line per prompt, a second line would answer a second prompt) and at most pamPasswordBytesMax
 * bytes (libpam_misc reads a response into PAM_MAX_RESP_SIZE = 512 bytes).
 *
 * pam_unix checks other users' passwords only when the master runs as root (otherwise its unix_chkpwd
 * helper answers for the calling user alone), as with Salt's own master.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import type { MasterConfig } from "../../../shared/config/defaults.js";
import { BrineError } from "../../../shared/errors.js";
import { getLogger, type Logger } from "../../../shared/log.js";
import type { EauthBackend, EauthCredentials } from "../backend.js";
import { checkCredentials, checkUsername, Gate, OptionReader, shown, type CredentialRules } from "./common.js";

/** helper processes one backend (one request worker) runs at once, and how many more checks may wait */
export const pamChecksRunningMax = 8;
export const pamChecksWaitingMax = 64;
/** PAM_MAX_RESP_SIZE (512) less its terminating NUL */
export const pamPasswordBytesMax = 511;
const HELPER_CANDIDATES = ["/usr/bin/pamtester", "/usr/local/bin/pamtester", "/bin/pamtester"];
const ID_CANDIDATES = ["/usr/bin/id", "/bin/id"];

const RULES: CredentialRules = {
  passwordBytesMax: pamPasswordBytesMax,
  passwordForbidden: /[\r\n]/,
  usernamePattern: /^[A-Za-z0-9_.@\\][A-Za-z0-9_.@\\$-]*$/,
};

export interface PamEauthOptions {
  service: string;
  helper: string;
  timeoutMs: number;
  /** bounds of the helper processes at once (defaults pamChecksRunningMax, pamChecksWaitingMax) */
  runningMax?: number;
  waitingMax?: number;
}

/** reads `auth.pam.*`, throwing CONFIG_INVALID naming the option; `warn` hears what is valid but will not work */
export function readPamEauthOptions(cfg: MasterConfig, warn: (msg: string) => void = () => undefined): PamEauthOptions {
  const o = OptionReader.top(cfg);
  const service = o.stringOrDefault("auth.pam.service");
  if (!/^[A-Za-z0-9_][A-Za-z0-9_.+-]*$/.test(service)) throw o.bad("auth.pam.service", `is not a PAM service name: ${JSON.stringify(service)}`);
  if (existsSync("/etc/pam.d") && !existsSync(`/etc/pam.d/${service}`)) {
    warn(`auth.pam.service ${service}: /etc/pam.d/${service} does not exist, PAM will use its "other" service (usually: refuse everyone)`);
  }
  const helper = o.string("auth.pam.helper") ?? HELPER_CANDIDATES.find((p) => existsSync(p));
  if (!helper) throw o.bad("auth.pam.helper", `pamtester not found in ${HELPER_CANDIDATES.join(", ")} (Debian: apt-get install pamtester), or set its path`);
  if (!existsSync(helper)) throw o.bad("auth.pam.helper", `${helper} does not exist`);
  return { service, helper, timeoutMs: o.seconds("auth.pam.timeout") };
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** run a helper with a timeout; a helper that cannot start or is killed is a backend failure */
function run(file: string, args: string[], input: string | undefined, timeoutMs: number): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      { timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 64 * 1024, env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C", LC_ALL: "C" } },
      (err, stdout, stderr) => {
        if (err && (typeof err.code !== "number" || err.killed || err.signal)) {
          const why = err.killed || err.signal ? `no answer within ${timeoutMs} ms` : err.message;
          reject(new BrineError("EAUTH_BACKEND", `pam: ${file}: ${why}`));
          return;
        }
        resolve({ code: err ? (err.code as number) : 0, stdout: String(stdout), stderr: String(stderr) });
      },
    );
    child.stdin?.on("error", () => undefined); // the helper may exit before reading (unknown service, user)
    child.stdin?.end(input);
  });
}

export class PamEauthBackend implements EauthBackend {
  readonly name = "pam";
  private readonly idPath = ID_CANDIDATES.find((p) => existsSync(p)) ?? "id";
  private readonly gate: Gate;

  constructor(readonly opts: PamEauthOptions, private readonly log: Logger = getLogger("brine.auth.pam")) {
    this.gate = new Gate("pam", opts.runningMax ?? pamChecksRunningMax, opts.waitingMax ?? pamChecksWaitingMax);
  }

  async authenticate(creds: EauthCredentials): Promise<boolean> {
    const c = checkCredentials(this.name, creds, this.log, RULES);
    if (!c) return false;
    const r = await this.gate.run(() => run(this.opts.helper, [this.opts.service, c.username, "authenticate", "acct_mgmt"], `${c.password}\n`, this.opts.timeoutMs));
    if (r.code === 0) return true;
    const said = `${r.stdout} ${r.stderr}`.replace(/Password:\s*/g, "").replace(/\s+/g, " ").trim();
    this.log.debug(`eauth pam: ${shown(c.username)} refused by PAM service ${this.opts.service}: ${said || `exit ${r.code}`}`);
    return false;
  }

  async groups(creds: EauthCredentials): Promise<string[]> {
    const username = checkUsername(this.name, creds?.username, this.log, RULES);
    if (username === undefined) return [];
    const r = await this.gate.run(() => run(this.idPath, ["-Gn", "--", username], undefined, this.opts.timeoutMs));
    if (r.code !== 0) {
      this.log.debug(`eauth pam: no groups for ${shown(username)}: ${r.stderr.trim()}`);
      return [];
    }
    return [...new Set(r.stdout.trim().split(/\s+/).filter(Boolean))].sort();
  }
}

export function makePamBackend(cfg: MasterConfig, log: Logger = getLogger("brine.auth.pam")): PamEauthBackend {
  return new PamEauthBackend(readPamEauthOptions(cfg), log);
}

/** the start warnings of valid pam options (a service without a file in /etc/pam.d) */
export function pamStartWarnings(cfg: MasterConfig): string[] {
  const out: string[] = [];
  readPamEauthOptions(cfg, (m) => out.push(m));
  return out;
}
