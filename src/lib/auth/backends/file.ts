/**
 * The `file` eauth backend: Salt's salt/auth/file.py. Users and passwords in a local file, one of
 *
 * - `text` (default): fields split by `^field_separator` (":"), the username in field `^username_field` (1),
 *   the password in `^password_field` (2), numbered from 1; the password is plaintext or, with `^hashtype`,
 *   the hex digest of the password (Salt's hashutil.digest: md5, sha256, sha512; brine also takes sha1,
 *   sha224, sha384). As in Salt, each line is stripped of surrounding whitespace and the first line naming
 *   the user decides. Unlike Salt, a blank line or a line with too few fields is skipped with a warning
 *   (Salt refuses every user from that line on).
 * - `htpasswd`: Apache's `user:hash`; the hash schemes are those of ./crypt.ts (bcrypt, apr1, MD5-, SHA-256-
 *   and SHA-512-crypt, {SHA}); an entry in another scheme is refused with a warning, never accepted.
 * - `htdigest`: Apache's `user:realm:md5hex(user:realm:password)`, only lines of `^realm` (required).
 *
 * Options live inside `external_auth: file:` with a leading `^` (Salt passes them as kwargs). `^filename`
 * is required and must exist at start. The file is read again whenever its mtime, size or inode changes
 * (checked on each authentication, one stat). It has no groups (Salt's module has none either).
 */
import { createHash } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { existsSync } from "node:fs";
import type { TSchema } from "@sinclair/typebox";
import type { MasterConfig } from "../../../shared/config/defaults.js";
import { FILE_EAUTH_FILETYPES, FILE_EAUTH_HASHTYPES, FileEauthSchema } from "../../../shared/config/schema.js";
import { BrineError } from "../../../shared/errors.js";
import { getLogger, type Logger } from "../../../shared/log.js";
import type { EauthBackend, EauthCredentials } from "../backend.js";
import { checkCredentials, externalAuth, OptionReader, safeEqual } from "./common.js";
import { htpasswdScheme, type HashCheck } from "./crypt.js";

/** the largest user file read, bytes: a user list, not a database */
export const userFileBytesMax = 64 * 1024 * 1024;

export const FILE_TYPES = FILE_EAUTH_FILETYPES;
export const HASH_TYPES = FILE_EAUTH_HASHTYPES;

export interface FileEauthOptions {
  filename: string;
  filetype: (typeof FILE_TYPES)[number];
  hashtype: (typeof HASH_TYPES)[number];
  fieldSeparator: string;
  usernameField: number;
  passwordField: number;
  realm?: string;
}

/** reads `external_auth: file: ^...`; throws CONFIG_INVALID naming the option */
export function readFileEauthOptions(cfg: MasterConfig): FileEauthOptions {
  const section = externalAuth(cfg).file;
  const map = section && typeof section === "object" && !Array.isArray(section) ? (section as Record<string, unknown>) : {};
  const local = (name: string) => name.replace(/^external_auth:file:/, "");
  const o = new OptionReader((name) => map[local(name)], (name) => (FileEauthSchema.properties as Record<string, TSchema>)[local(name)]);
  const p = (k: string) => `external_auth:file:^${k}`;
  const filename = o.required(p("filename"), "when external_auth names file");
  if (!existsSync(filename)) throw o.bad(p("filename"), `${filename} does not exist`);
  const filetype = o.oneOf<(typeof FILE_TYPES)[number]>(p("filetype"));
  const hashtype = o.oneOf<(typeof HASH_TYPES)[number]>(p("hashtype"));
  const fieldSeparator = o.stringOrDefault(p("field_separator"));
  if (fieldSeparator === "") throw o.bad(p("field_separator"), "must not be empty");
  const usernameField = o.int(p("username_field"));
  const passwordField = o.int(p("password_field"));
  if (filetype === "text" && usernameField === passwordField) throw o.bad(p("password_field"), "must differ from ^username_field");
  const realm = o.string(p("realm"));
  if (filetype === "htdigest" && !realm) throw o.bad(p("realm"), "required for ^filetype htdigest");
  return { filename, filetype, hashtype, fieldSeparator, usernameField, passwordField, realm };
}

type Entry = { kind: "text"; password: string } | { kind: "hash"; check: HashCheck } | { kind: "digest"; hex: string };

interface Loaded {
  key: string;
  users: Map<string, Entry>;
}

export class FileEauthBackend implements EauthBackend {
  readonly name = "file";
  private loaded?: Loaded;
  private loading?: Promise<Loaded>;

  constructor(readonly opts: FileEauthOptions, private readonly log: Logger = getLogger("brine.auth.file")) {}

  async authenticate(creds: EauthCredentials): Promise<boolean> {
    const c = checkCredentials(this.name, creds, this.log);
    if (!c) return false;
    const users = (await this.current()).users;
    const e = users.get(c.username);
    if (!e) {
      safeEqual(c.password, "no such user"); // same work as a wrong password
      this.log.debug(`eauth file: no user ${JSON.stringify(c.username)} in ${this.opts.filename}`);
      return false;
    }
    let ok: boolean;
    if (e.kind === "text") {
      ok = this.opts.hashtype === "plaintext"
        ? safeEqual(c.password, e.password)
        : safeEqual(createHash(this.opts.hashtype).update(c.password, "utf8").digest("hex"), e.password.toLowerCase());
    } else if (e.kind === "digest") {
      ok = safeEqual(createHash("md5").update(`${c.username}:${this.opts.realm}:${c.password}`, "utf8").digest("hex"), e.hex);
    } else if (!e.check.supported) {
      this.log.warning(`eauth file: user ${JSON.stringify(c.username)} refused: the ${e.check.scheme} hash in ${this.opts.filename} is not supported (${e.check.why})`);
      return false;
    } else {
      ok = await e.check.verify(c.password);
    }
    if (!ok) this.log.debug(`eauth file: wrong password for ${JSON.stringify(c.username)}`);
    return ok;
  }

  /** the parsed file, read again when it changed since the last read */
  private async current(): Promise<Loaded> {
    let st;
    try {
      st = await stat(this.opts.filename);
    } catch (e) {
      throw new BrineError("EAUTH_BACKEND", `file: cannot stat ${this.opts.filename}: ${(e as Error).message}`);
    }
    const key = `${st.ino}:${st.size}:${st.mtimeMs}`;
    if (this.loaded?.key === key) return this.loaded;
    if (st.size > userFileBytesMax) throw new BrineError("EAUTH_BACKEND", `file: ${this.opts.filename} is larger than ${userFileBytesMax} bytes`);
    if (!this.loading) {
      this.loading = this.read(key).finally(() => (this.loading = undefined));
    }
    return (this.loaded = await this.loading);
  }

  private async read(key: string): Promise<Loaded> {
    let text: string;
    try {
      text = await readFile(this.opts.filename, "utf8");
    } catch (e) {
      throw new BrineError("EAUTH_BACKEND", `file: cannot read ${this.opts.filename}: ${(e as Error).message}`);
    }
    const users = this.parse(text);
    this.log.debug(`eauth file: read ${users.size} users from ${this.opts.filename}`);
    return { key, users };
  }

  /** one Map entry per user, the first line naming a user decides (Salt's text loop does the same) */
  parse(text: string): Map<string, Entry> {
    const users = new Map<string, Entry>();
    const where = (n: number) => `${this.opts.filename} line ${n + 1}`;
    const lines = text.split(/\r?\n/);
    for (let n = 0; n < lines.length; n++) {
      const line = lines[n].trim();
      if (line === "") continue;
      if (this.opts.filetype === "text") {
        const f = line.split(this.opts.fieldSeparator);
        const user = f[this.opts.usernameField - 1];
        const pw = f[this.opts.passwordField - 1];
        if (user === undefined || pw === undefined) {
          this.log.warning(`eauth file: ${where(n)} has ${f.length} fields, fewer than ^username_field/^password_field need: skipped`);
          continue;
        }
        if (!users.has(user)) users.set(user, { kind: "text", password: pw });
        continue;
      }
      if (line.startsWith("#")) continue;
      const colon = line.indexOf(":");
      if (colon <= 0) {
        this.log.warning(`eauth file: ${where(n)} is not "user:..." : skipped`);
        continue;
      }
      const user = line.slice(0, colon);
      const rest = line.slice(colon + 1);
      if (users.has(user)) continue;
      if (this.opts.filetype === "htpasswd") {
        const check = htpasswdScheme(rest.trim());
        if (!check.supported) this.log.warning(`eauth file: ${where(n)}: user ${JSON.stringify(user)} has a ${check.scheme} hash: ${check.why}; this user cannot log in`);
        users.set(user, { kind: "hash", check });
      } else {
        const c2 = rest.indexOf(":");
        if (c2 < 0 || !/^[0-9a-fA-F]{32}$/.test(rest.slice(c2 + 1).trim())) {
          this.log.warning(`eauth file: ${where(n)} is not "user:realm:md5hex" : skipped`);
          continue;
        }
        if (rest.slice(0, c2) !== this.opts.realm) continue;
        users.set(user, { kind: "digest", hex: rest.slice(c2 + 1).trim().toLowerCase() });
      }
    }
    return users;
  }
}

export function makeFileBackend(cfg: MasterConfig, log?: Logger): FileEauthBackend {
  return new FileEauthBackend(readFileEauthOptions(cfg), log);
}
