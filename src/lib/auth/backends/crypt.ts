/**
 * Password hash schemes of Apache htpasswd files, checked the way passlib's HtpasswdFile (what Salt's
 * file eauth uses) and Apache's own htpasswd check them:
 *
 * - `$2y$`, `$2a$`, `$2b$` bcrypt: bcryptjs.
 * - `$apr1$` Apache's MD5 and `$1$` MD5-crypt: implemented here from Poul-Henning Kamp's published
 *   algorithm (FreeBSD's md5crypt.c, which APR's apr_md5.c follows with another magic). Not the npm package
 *   `apache-md5`: it has one maintainer, its registry timestamps are out of order (a 1.1.1 published after
 *   1.1.8), and it would be a new dependency for ~40 lines of a frozen algorithm over node:crypto's MD5.
 * - `$5$`, `$6$` SHA-256/SHA-512-crypt: implemented from Ulrich Drepper's published specification
 *   ("Unix crypt using SHA-256 and SHA-512"), which glibc's crypt(3) and passlib follow.
 * - `{SHA}`: base64 of the SHA-1 of the password (Apache's `htpasswd -s`).
 *
 * Not supported, refused with a warning naming the scheme: traditional DES crypt (13 characters, Apache's
 * `htpasswd -d`; it reads only 8 characters of a password), anything unrecognised, and plaintext entries
 * (passlib would take an unrecognised entry as a plaintext password; Apache on Unix never does, and an
 * accidental plaintext file should not log anyone in).
 *
 * Every comparison is of whole hash strings through safeEqual (constant time).
 */
import { createHash } from "node:crypto";
import { safeEqual } from "./common.js";

const ITOA64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/** most SHA-crypt rounds accepted in a stored hash: a larger count would hold a request worker for minutes */
export const shaCryptRoundsMax = 10_000_000;

function to64(v: number, n: number): string {
  let out = "";
  for (let i = 0; i < n; i++) {
    out += ITOA64[v & 0x3f];
    v >>>= 6;
  }
  return out;
}

/** MD5-crypt with magic "$1$" or "$apr1$"; salt is at most 8 characters */
export function md5Crypt(password: string, magic: "$1$" | "$apr1$", saltIn: string): string {
  const pw = Buffer.from(password, "utf8");
  const salt = Buffer.from(saltIn.slice(0, 8), "utf8");
  const alt = createHash("md5").update(pw).update(salt).update(pw).digest();
  const ctx = createHash("md5").update(pw).update(magic).update(salt);
  for (let left = pw.length; left > 0; left -= 16) ctx.update(alt.subarray(0, Math.min(left, 16)));
  for (let i = pw.length; i > 0; i >>>= 1) ctx.update(i & 1 ? Buffer.of(0) : pw.subarray(0, 1));
  let fin = ctx.digest();
  for (let i = 0; i < 1000; i++) {
    const c = createHash("md5");
    c.update(i & 1 ? pw : fin);
    if (i % 3) c.update(salt);
    if (i % 7) c.update(pw);
    c.update(i & 1 ? fin : pw);
    fin = c.digest();
  }
  let out = "";
  for (const [a, b, c] of [[0, 6, 12], [1, 7, 13], [2, 8, 14], [3, 9, 15], [4, 10, 5]]) out += to64((fin[a] << 16) | (fin[b] << 8) | fin[c], 4);
  out += to64(fin[11], 2);
  return `${magic}${salt.toString("utf8")}$${out}`;
}

const SHA256_ORDER = [[0, 10, 20], [21, 1, 11], [12, 22, 2], [3, 13, 23], [24, 4, 14], [15, 25, 5], [6, 16, 26], [27, 7, 17], [18, 28, 8], [9, 19, 29]];
const SHA512_ORDER = [
  [0, 21, 42], [22, 43, 1], [44, 2, 23], [3, 24, 45], [25, 46, 4], [47, 5, 26], [6, 27, 48], [28, 49, 7], [50, 8, 29], [9, 30, 51], [31, 52, 10],
  [53, 11, 32], [12, 33, 54], [34, 55, 13], [56, 14, 35], [15, 36, 57], [37, 58, 16], [59, 17, 38], [18, 39, 60], [40, 61, 19], [62, 20, 41],
];

/** repeat `block` to exactly `len` bytes */
function stretch(block: Buffer, len: number): Buffer {
  const out = Buffer.alloc(len);
  for (let off = 0; off < len; off += block.length) block.copy(out, off, 0, Math.min(block.length, len - off));
  return out;
}

/**
 * SHA-crypt ($5$ SHA-256, $6$ SHA-512); `rounds` undefined means the default 5000 written without a
 * "rounds=" field, as the specification says.
 */
export function shaCrypt(password: string, kind: "5" | "6", saltIn: string, rounds?: number): string {
  const algo = kind === "5" ? "sha256" : "sha512";
  const size = kind === "5" ? 32 : 64;
  const H = () => createHash(algo);
  const P = Buffer.from(password, "utf8");
  const S = Buffer.from(saltIn, "utf8").subarray(0, 16);
  const n = rounds === undefined ? 5000 : Math.min(Math.max(rounds, 1000), 999_999_999);
  const B = H().update(P).update(S).update(P).digest();
  const a = H().update(P).update(S);
  let cnt = P.length;
  for (; cnt > size; cnt -= size) a.update(B);
  a.update(B.subarray(0, cnt));
  for (cnt = P.length; cnt > 0; cnt >>>= 1) a.update(cnt & 1 ? B : P);
  const A = a.digest();
  const dp = H();
  for (let i = 0; i < P.length; i++) dp.update(P);
  const Pp = stretch(dp.digest(), P.length);
  const ds = H();
  for (let i = 0; i < 16 + A[0]; i++) ds.update(S);
  const Sp = ds.digest().subarray(0, S.length);
  let C = A;
  for (let r = 0; r < n; r++) {
    const c = H();
    c.update(r & 1 ? Pp : C);
    if (r % 3) c.update(Sp);
    if (r % 7) c.update(Pp);
    c.update(r & 1 ? C : Pp);
    C = c.digest();
  }
  let out = "";
  for (const [x, y, z] of kind === "5" ? SHA256_ORDER : SHA512_ORDER) out += to64((C[x] << 16) | (C[y] << 8) | C[z], 4);
  out += kind === "5" ? to64((C[31] << 8) | C[30], 3) : to64(C[63], 2);
  const roundsField = rounds === undefined ? "" : `rounds=${n}$`;
  return `$${kind}$${roundsField}${S.toString("utf8")}$${out}`;
}

export type HashCheck =
  | { scheme: string; supported: true; verify(password: string): Promise<boolean> }
  | { scheme: string; supported: false; why: string };

const SHA_CRYPT = /^\$([56])\$(?:rounds=(\d{1,10})\$)?([^$]{0,16})\$([./0-9A-Za-z]+)$/;

/** how to check a password against one stored htpasswd hash (parsed once, when the file is read) */
export function htpasswdScheme(stored: string): HashCheck {
  if (/^\$2[aby]\$\d\d\$[./0-9A-Za-z]{53}$/.test(stored)) {
    return { scheme: "bcrypt", supported: true, verify: async (pw) => (await import("bcryptjs")).default.compare(pw, stored) };
  }
  const md5 = /^(\$apr1\$|\$1\$)([^$]{0,8})\$[./0-9A-Za-z]{22}$/.exec(stored);
  if (md5) {
    const magic = md5[1] as "$1$" | "$apr1$";
    const scheme = magic === "$1$" ? "md5-crypt" : "apr1";
    return { scheme, supported: true, verify: async (pw) => safeEqual(md5Crypt(pw, magic, md5[2]), stored) };
  }
  const sha = SHA_CRYPT.exec(stored);
  if (sha) {
    const scheme = sha[1] === "5" ? "sha256-crypt" : "sha512-crypt";
    const rounds = sha[2] === undefined ? undefined : Number(sha[2]);
    if (rounds !== undefined && rounds > shaCryptRoundsMax) {
      return { scheme, supported: false, why: `rounds=${rounds} exceeds ${shaCryptRoundsMax}` };
    }
    return { scheme, supported: true, verify: async (pw) => safeEqual(shaCrypt(pw, sha[1] as "5" | "6", sha[3], rounds), stored) };
  }
  if (/^\{SHA\}[A-Za-z0-9+/]{27}=$/.test(stored)) {
    return {
      scheme: "{SHA}",
      supported: true,
      verify: async (pw) => safeEqual(`{SHA}${createHash("sha1").update(pw, "utf8").digest("base64")}`, stored),
    };
  }
  if (/^[./0-9A-Za-z]{13}$/.test(stored)) return { scheme: "des-crypt", supported: false, why: "traditional DES crypt is not supported (it reads only 8 characters of a password); re-hash with htpasswd -B" };
  if (stored.startsWith("$")) return { scheme: stored.split("$")[1] ?? "?", supported: false, why: "unknown crypt scheme" };
  return { scheme: "plaintext?", supported: false, why: "not a recognised hash (plaintext passwords are not accepted in htpasswd files)" };
}
