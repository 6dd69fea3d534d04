/**
 * The CLI key (`cachedir/.<user>_key`, 0600): what local `salt` clients send as `key` in `publish`.
 * Kept across restarts as 3007 does; created when missing.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

export function rootKeyPath(cachedir: string, user: string): string {
  return path.join(cachedir, `.${user}_key`);
}

export function ensureRootKey(cachedir: string, user: string): string {
  const file = rootKeyPath(cachedir, user);
  mkdirSync(cachedir, { recursive: true, mode: 0o700 });
  if (!existsSync(file)) {
    // Salt's mk_key: urlsafe base64 of 64 random bytes, without a trailing newline
    writeFileSync(file, randomBytes(64).toString("base64url"), { mode: 0o600 });
  }
  chmodSync(file, 0o600);
  return readFileSync(file, "utf8").trim();
}
