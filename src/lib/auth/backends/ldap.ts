/**
 * The `ldap` eauth backend: Salt's salt/auth/ldap.py over ldapts, with Salt's `auth.ldap.*` options.
 *
 * Authentication is an LDAP simple bind as the user:
 * - with `auth.ldap.binddn` + `auth.ldap.bindpw` (a lookup account): bind as it, search `basedn` (`scope`
 *   0 base, 1 one level, 2 subtree) with `filter` (`{{ username }}` replaced by the escaped username),
 *   require exactly one entry, then bind as that entry's DN with the user's password;
 * - with `binddn` alone: `binddn` is a template (`uid={{ username }},ou=People,dc=example,dc=org`), bound
 *   with the user's password (the username escaped as a DN value).
 * Server: `uri` (ldap:// or ldaps://), else `server` + `port`, ldaps:// when `tls`; `starttls` upgrades a
 * plain connection; `no_verify` skips certificate checks (warned at start); brine's `ca_file` adds PEM
 * certificates to trust besides the system's (Salt leaves that to OpenLDAP's ldap.conf TLS_CACERT). Without a lookup account,
 * `anonymous` reads the groups over an anonymous connection instead of one bound as the user.
 *
 * Groups (for `name%` entries of external_auth), bound as the lookup account, else as the user:
 * - default (OpenLDAP): search `ou=<groupou>,<basedn>` (or `basedn` when groupou is empty) for
 *   `(&(<accountattributename>=<user>)(objectClass=<groupclass>))`: each group entry listing the user
 *   gives its `cn`; the user's own entry (groupclass `person` with the memberOf overlay) gives the first
 *   RDN value of each `<groupattribute>` value.
 * - `activedirectory`: the user's DN from `(&(<accountattributename>=<user>)(objectClass=<persontype>))`,
 *   then the `cn` of each `(&(member=<dn>)(objectClass=<groupclass>))`.
 * - `freeipa`: search `group_basedn` with `group_filter` (templated); a group counts when one of its
 *   `<accountattributename>`/`<groupattribute>` values names the user (first RDN value).
 * processAcl expands `ldap(<search base>)` targets of an auth list into one entry per computer
 * (`objectClass=computer`) under that base, its `cn` lowercased with `minion_stripdomains` removed.
 *
 * Where brine differs from Salt, on purpose:
 * - every username is escaped (RFC 4515 in filters, RFC 4514 in DNs) in every search; Salt leaves it raw
 *   in the group searches, so `*)(uid=*` could match other users' groups;
 * - an empty password is always refused (an LDAP bind with a DN and no password is an "unauthenticated
 *   bind" that many servers answer with success);
 * - `auth_by_group_membership_only` (Salt: "FOR TESTING ONLY", the password is ignored) is not honoured:
 *   passwords are always checked, and the start warns that the option is ignored;
 * - in the default group search the user's own entry gives only its groupattribute values (Salt also adds
 *   the user's own `cn` as a group name);
 * - templates substitute `{{ username }}` only (Salt renders full Jinja); any other `{{`/`{%` is refused at start;
 * - groups() does not check the password when a lookup account is configured (Salt checks it only on the
 *   first call of a job, `show_jid`): the core calls authenticate first;
 * - every connect and operation has a timeout, `auth.ldap.timeout` seconds (brine's option, default 5).
 * A refused password or an unknown user is `false`; a directory that cannot be reached, a lookup bind that
 * fails or a timeout is thrown as BrineError("EAUTH_BACKEND").
 */
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { rootCertificates, type ConnectionOptions } from "node:tls";
import type { Client, Entry } from "ldapts";
import type { MasterConfig } from "../../../shared/config/defaults.js";
import { BrineError } from "../../../shared/errors.js";
import { getLogger, type Logger } from "../../../shared/log.js";
import type { EauthBackend, EauthCredentials } from "../backend.js";

/** ldapts, loaded at the first connection: a master without LDAP eauth never compiles it (every request thread would) */
let ldapts: typeof import("ldapts") | undefined;
/** Whether `e` is ldapts' error class `name` (only an LDAP call, after ldapts loaded, throws one). */
const ldapError = (e: unknown, name: "InvalidCredentialsError" | "NoSuchObjectError"): boolean => ldapts !== undefined && e instanceof ldapts[name];
import { checkCredentials, checkUsername, OptionReader, shown } from "./common.js";

/** most entries a search may return (a group list, not the directory) */
export const ldapSearchEntriesMax = 1000;

export interface LdapEauthOptions {
  url: string;
  starttls: boolean;
  noVerify: boolean;
  /** PEM certificates trusted besides the system's (brine's auth.ldap.ca_file) */
  ca?: string;
  anonymous: boolean;
  scope: "base" | "one" | "sub";
  basedn: string;
  binddn?: string;
  bindpw?: string;
  filter?: string;
  accountattributename: string;
  groupattribute: string;
  groupou: string;
  groupclass: string;
  groupBasedn?: string;
  groupFilter?: string;
  persontype: string;
  minionStripdomains: string[];
  activedirectory: boolean;
  freeipa: boolean;
  timeoutMs: number;
}

/** RFC 4515: a value inside a filter */
export function escapeFilterValue(v: string): string {
  return v.replace(/[\\*()\u0000]/g, (c) => `\\${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

/** RFC 4514: an attribute value inside a DN */
export function escapeDnValue(v: string): string {
  let out = v.replace(/[\\,+"<>;=\u0000]/g, (c) => (c === "\u0000" ? "\\00" : `\\${c}`));
  if (/^[ #]/.test(out)) out = `\\${out}`;
  if (/ $/.test(out)) out = `${out.slice(0, -1)}\\ `;
  return out;
}

const USERNAME_TAG = /\{\{\s*username\s*\}\}/g;
const HAS_USERNAME_TAG = /\{\{\s*username\s*\}\}/;

function render(template: string, value: string): string {
  return template.replace(USERNAME_TAG, () => value);
}

/** first RDN's value of a DN ("uid=alice,ou=People" -> "alice"), as Salt's split(",")[0].split("=")[-1] */
function firstRdnValue(dn: string): string {
  return dn.split(",")[0].split("=").pop() ?? "";
}

/** an entry's values of one attribute, as strings, whatever case the server wrote the name in */
function values(entry: Entry, attr: string): string[] {
  const want = attr.toLowerCase();
  for (const [k, v] of Object.entries(entry)) {
    if (k.toLowerCase() !== want || k === "dn") continue;
    const list = Array.isArray(v) ? v : [v];
    return list.map((x) => (Buffer.isBuffer(x) ? x.toString("utf8") : String(x)));
  }
  return [];
}

/** reads `auth.ldap.*`, throwing CONFIG_INVALID naming the option; `warn` hears what is valid but weakens security */
export function readLdapEauthOptions(cfg: MasterConfig, warn: (msg: string) => void = () => undefined): LdapEauthOptions {
  const o = OptionReader.top(cfg);
  const k = (n: string) => `auth.ldap.${n}`;
  const attrName = (n: string) => {
    const v = o.stringOrDefault(k(n));
    if (!/^([A-Za-z][A-Za-z0-9-]*|\d+(\.\d+)+)$/.test(v)) throw o.bad(k(n), `must be an attribute or object class name, got ${JSON.stringify(v)}`);
    return v;
  };
  const template = (n: string) => {
    const v = o.string(k(n));
    if (v !== undefined && /\{%|\{\{/.test(v.replace(USERNAME_TAG, ""))) throw o.bad(k(n), "only {{ username }} can be substituted");
    return v === "" ? undefined : v;
  };
  const tls = o.bool(k("tls"));
  const starttls = o.bool(k("starttls"));
  if (tls && starttls) throw o.bad(k("starttls"), "cannot be combined with auth.ldap.tls (enable one of them)");
  const uri = o.string(k("uri")) ?? "";
  let url: string;
  if (uri) {
    if (!/^ldaps?:\/\/[^\s/]+\/?$/i.test(uri)) throw o.bad(k("uri"), `must be ldap://host[:port] or ldaps://host[:port], got ${JSON.stringify(uri)}`);
    url = uri.replace(/\/$/, "");
  } else {
    const server = o.stringOrDefault(k("server"));
    if (!/^[A-Za-z0-9.:\-[\]_]+$/.test(server)) throw o.bad(k("server"), `is not a host name or address: ${JSON.stringify(server)}`);
    url = `${tls ? "ldaps" : "ldap"}://${server}:${o.int(k("port"))}`;
  }
  const scopeNum = o.int(k("scope"));
  const binddn = template("binddn");
  const bindpw = o.string(k("bindpw"));
  const filter = template("filter");
  if (!binddn) throw o.bad(k("binddn"), "required: a lookup account (with auth.ldap.bindpw and auth.ldap.filter) or a DN template such as uid={{ username }},ou=People,dc=example,dc=org");
  if (bindpw && !filter) throw o.bad(k("filter"), "required with auth.ldap.bindpw (how the user's entry is found, e.g. uid={{ username }})");
  if (!bindpw && !HAS_USERNAME_TAG.test(binddn)) {
    warn("auth.ldap.binddn has no {{ username }} and there is no auth.ldap.bindpw: every ldap user logs in with the password of that one DN");
  }
  const freeipa = o.bool(k("freeipa"));
  const groupFilter = template("group_filter");
  const groupBasedn = o.string(k("group_basedn"));
  if (freeipa && (!groupFilter || !groupBasedn)) throw o.bad(k(groupFilter ? "group_basedn" : "group_filter"), "required with auth.ldap.freeipa");
  const noVerify = o.bool(k("no_verify"));
  const caFile = o.string(k("ca_file"));
  let ca: string | undefined;
  if (caFile) {
    try {
      ca = readFileSync(caFile, "utf8");
    } catch (e) {
      throw o.bad(k("ca_file"), `cannot be read: ${(e as Error).message}`);
    }
    if (!ca.includes("-----BEGIN CERTIFICATE-----")) throw o.bad(k("ca_file"), `${caFile} holds no PEM certificate`);
  }
  if (noVerify) warn("auth.ldap.no_verify is set: the LDAP server's certificate is not checked, and passwords go to whoever answers");
  if (o.bool(k("auth_by_group_membership_only"))) {
    warn("auth.ldap.auth_by_group_membership_only is ignored by brine: LDAP passwords are always checked");
  }
  return {
    url,
    starttls,
    noVerify,
    ca,
    anonymous: o.bool(k("anonymous")),
    scope: (["base", "one", "sub"] as const)[scopeNum],
    basedn: o.stringOrDefault(k("basedn")),
    binddn,
    bindpw: bindpw || undefined,
    filter,
    accountattributename: attrName("accountattributename"),
    groupattribute: attrName("groupattribute"),
    groupou: o.stringOrDefault(k("groupou")),
    groupclass: attrName("groupclass"),
    groupBasedn,
    groupFilter,
    persontype: attrName("persontype"),
    minionStripdomains: o.stringList(k("minion_stripdomains")),
    activedirectory: o.bool(k("activedirectory")),
    freeipa,
    timeoutMs: o.seconds(k("timeout")),
  };
}

export class LdapEauthBackend implements EauthBackend {
  readonly name = "ldap";

  constructor(readonly opts: LdapEauthOptions, private readonly log: Logger = getLogger("brine.auth.ldap")) {}

  private async connect(): Promise<Client> {
    const tlsOptions: ConnectionOptions = { rejectUnauthorized: !this.opts.noVerify, ...(this.opts.ca ? { ca: [...rootCertificates, this.opts.ca] } : {}) };
    // ldapts speaks TLS from the first byte whenever tlsOptions is given: only for ldaps://
    const ldaps = this.opts.url.toLowerCase().startsWith("ldaps://");
    const client = new (ldapts ??= await import("ldapts")).Client({ url: this.opts.url, timeout: this.opts.timeoutMs, connectTimeout: this.opts.timeoutMs, tlsOptions: ldaps ? tlsOptions : undefined, strictDN: false });
    if (this.opts.starttls) {
      try {
        // ldapts upgrades the socket without naming the host, and Node then checks the certificate against
        // "localhost": name the server for the identity check (and SNI, for a name)
        const host = new URL(this.opts.url).hostname.replace(/^\[(.*)\]$/, "$1");
        await client.startTLS({ ...tlsOptions, host, ...(isIP(host) ? {} : { servername: host }) });
      } catch (e) {
        await this.close(client);
        throw this.failure("StartTLS", e);
      }
    }
    return client;
  }

  private async close(client: Client): Promise<void> {
    await client.unbind().catch(() => undefined);
  }

  private failure(what: string, e: unknown): BrineError {
    return new BrineError("EAUTH_BACKEND", `ldap ${this.opts.url}: ${what}: ${(e as Error)?.message ?? String(e)}`);
  }

  /** a connection bound as the lookup account, or undefined when none is configured */
  private async lookupBind(): Promise<Client | undefined> {
    if (!this.opts.bindpw) return undefined;
    const client = await this.connect();
    try {
      await client.bind(this.opts.binddn!, this.opts.bindpw);
      return client;
    } catch (e) {
      await this.close(client);
      throw this.failure(`bind as the lookup account ${this.opts.binddn}`, e);
    }
  }

  private async search(client: Client, base: string, scope: "base" | "one" | "sub", filter: string, attributes: string[]): Promise<Entry[]> {
    try {
      const f = filter.startsWith("(") ? filter : `(${filter})`;
      const r = await client.search(base, { scope, filter: f, attributes, sizeLimit: ldapSearchEntriesMax, timeLimit: Math.ceil(this.opts.timeoutMs / 1000) });
      return r.searchEntries;
    } catch (e) {
      if (ldapError(e, "NoSuchObjectError")) return [];
      throw this.failure(`search ${filter} under ${JSON.stringify(base)}`, e);
    }
  }

  /** the user's DN: found by the lookup account, or the binddn template */
  private async userDn(username: string): Promise<string | undefined> {
    const lookup = await this.lookupBind();
    if (!lookup) return render(this.opts.binddn!, escapeDnValue(username));
    try {
      const filter = render(this.opts.filter!, escapeFilterValue(username));
      const found = await this.search(lookup, this.opts.basedn, this.opts.scope, filter, ["1.1"]);
      if (found.length === 0) {
        this.log.info(`eauth ldap: no entry for user ${shown(username)} (filter ${filter})`);
        return undefined;
      }
      if (found.length > 1) {
        this.log.error(`eauth ldap: ${found.length} entries match user ${shown(username)}; auth.ldap.filter must find one`);
        return undefined;
      }
      return found[0].dn;
    } finally {
      await this.close(lookup);
    }
  }

  async authenticate(creds: EauthCredentials): Promise<boolean> {
    const c = checkCredentials(this.name, creds, this.log);
    if (!c) return false;
    const dn = await this.userDn(c.username);
    if (!dn) return false;
    const client = await this.connect();
    try {
      await client.bind(dn, c.password);
      this.log.debug(`eauth ldap: ${shown(c.username)} bound as ${dn}`);
      return true;
    } catch (e) {
      if (ldapError(e, "InvalidCredentialsError")) {
        this.log.debug(`eauth ldap: wrong password for ${shown(c.username)} (${dn})`);
        return false;
      }
      throw this.failure(`bind as ${dn}`, e);
    } finally {
      await this.close(client);
    }
  }

  async groups(creds: EauthCredentials): Promise<string[]> {
    const username = checkUsername(this.name, creds?.username, this.log);
    if (username === undefined) return [];
    let client = await this.lookupBind();
    if (!client && this.opts.anonymous) {
      client = await this.connect(); // auth.ldap.anonymous: "bind to LDAP anonymously to determine group membership"
    } else if (!client) {
      // no lookup account: the user reads the directory as themself
      const c = checkCredentials(this.name, creds, this.log);
      if (!c) return [];
      const dn = render(this.opts.binddn!, escapeDnValue(username));
      client = await this.connect();
      try {
        await client.bind(dn, c.password);
      } catch (e) {
        await this.close(client);
        if (ldapError(e, "InvalidCredentialsError")) {
          this.log.warning(`eauth ldap: bind as ${dn} to read the groups of ${shown(username)} failed: wrong password`);
          return [];
        }
        throw this.failure(`bind as ${dn}`, e);
      }
    }
    try {
      const groups = this.opts.activedirectory
        ? await this.adGroups(client, username)
        : this.opts.freeipa
          ? await this.freeipaGroups(client, username)
          : await this.posixGroups(client, username);
      const unique = [...new Set(groups)];
      this.log.debug(`eauth ldap: ${shown(username)} is in groups ${JSON.stringify(unique)}`);
      return unique;
    } finally {
      await this.close(client);
    }
  }

  private async posixGroups(client: Client, username: string): Promise<string[]> {
    const o = this.opts;
    const base = o.groupou ? `ou=${escapeDnValue(o.groupou)}${o.basedn ? `,${o.basedn}` : ""}` : o.basedn;
    const filter = `(&(${o.accountattributename}=${escapeFilterValue(username)})(objectClass=${o.groupclass}))`;
    const out: string[] = [];
    for (const e of await this.search(client, base, "sub", filter, [o.accountattributename, "cn", o.groupattribute])) {
      if (firstRdnValue(e.dn) === username) {
        for (const g of values(e, o.groupattribute)) out.push(firstRdnValue(g));
      } else if (values(e, o.accountattributename).includes(username)) {
        const cn = values(e, "cn")[0];
        if (cn) out.push(cn);
      }
    }
    return out;
  }

  private async adGroups(client: Client, username: string): Promise<string[]> {
    const o = this.opts;
    const people = await this.search(client, o.basedn, "sub", `(&(${o.accountattributename}=${escapeFilterValue(username)})(objectClass=${o.persontype}))`, ["1.1"]);
    if (people.length === 0) {
      this.log.warning(`eauth ldap: no ${o.persontype} entry for user ${shown(username)}: no groups`);
      return [];
    }
    const filter = `(&(member=${escapeFilterValue(people[0].dn)})(objectClass=${o.groupclass}))`;
    return (await this.search(client, o.basedn, "sub", filter, ["cn"])).map((e) => values(e, "cn")[0]).filter((x): x is string => !!x);
  }

  private async freeipaGroups(client: Client, username: string): Promise<string[]> {
    const o = this.opts;
    const filter = render(o.groupFilter!, escapeFilterValue(username));
    const out: string[] = [];
    for (const e of await this.search(client, o.groupBasedn!, "sub", filter, [o.accountattributename, o.groupattribute, "cn"])) {
      const members = [...values(e, o.accountattributename), ...values(e, o.groupattribute)];
      if (members.some((m) => firstRdnValue(m) === username)) out.push(firstRdnValue(e.dn));
    }
    return out;
  }

  /**
   * Salt's process_acl: each `{ "ldap(<base>)": perms }` of the auth list becomes `{ <minion id>: perms }`
   * for every computer under <base>. Needs the lookup account; without it, or when the directory fails,
   * the ldap(...) entries are dropped with a log line (they grant nothing rather than match by accident).
   */
  async processAcl(authList: unknown[]): Promise<unknown[]> {
    const isLdapKey = (k: string) => k.startsWith("ldap(") && k.endsWith(")");
    const hasLdap = authList.some((it) => it !== null && typeof it === "object" && !Array.isArray(it) && Object.keys(it).some(isLdapKey));
    if (!hasLdap) return authList;
    let client: Client | undefined;
    try {
      client = await this.lookupBind();
    } catch (e) {
      this.log.error(`eauth ldap: ldap(...) targets dropped: ${(e as Error).message}`);
    }
    if (!client && this.opts.bindpw === undefined) this.log.error("eauth ldap: ldap(...) targets dropped: expanding them needs auth.ldap.binddn with auth.ldap.bindpw");
    try {
      const out: unknown[] = [];
      for (const item of authList) {
        if (item === null || typeof item !== "object" || Array.isArray(item)) {
          out.push(item);
          continue;
        }
        for (const [key, perms] of Object.entries(item as Record<string, unknown>)) {
          if (!isLdapKey(key)) {
            out.push({ [key]: perms });
            continue;
          }
          if (!client) continue;
          const base = key.slice(5, -1).trim().replace(/^(['"])(.*)\1$/, "$2");
          let found: Entry[];
          try {
            found = await this.search(client, base, "sub", "(objectClass=computer)", ["cn"]);
          } catch (e) {
            this.log.error(`eauth ldap: ${key} dropped: ${(e as Error).message}`);
            continue;
          }
          for (const e of found) {
            let id = values(e, "cn")[0]?.toLowerCase();
            if (!id) continue;
            const strip = this.opts.minionStripdomains.find((d) => id!.endsWith(d));
            if (strip) id = id.slice(0, -strip.length);
            out.push({ [id]: perms });
          }
        }
      }
      return out;
    } finally {
      if (client) await this.close(client);
    }
  }
}

export function makeLdapBackend(cfg: MasterConfig, log: Logger = getLogger("brine.auth.ldap")): LdapEauthBackend {
  return new LdapEauthBackend(readLdapEauthOptions(cfg), log);
}

/** the start warnings of valid ldap options (no_verify, auth_by_group_membership_only, one shared DN) */
export function ldapStartWarnings(cfg: MasterConfig): string[] {
  const out: string[] = [];
  readLdapEauthOptions(cfg, (m) => out.push(m));
  return out;
}
