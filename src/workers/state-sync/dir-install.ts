/**
 * Installing one item of a directory channel (state-sync thread; DirSource in sources.ts decides where and records
 * the result): the bytes go to a partial file `.brine-part-<hash>` beside the target, are checked against the
 * manifest's sha256 (and, on the key channels, must be an RSA public key), get the item's mode, and are renamed
 * onto the target. Nothing half-written is ever at the target's name.
 *
 * - A small item (up to syncItemBytesMax, fetched whole) is written with synchronous calls; its partial file is made
 *   with O_EXCL|O_NOFOLLOW, so whatever was planted at that name is removed, never followed.
 * - A larger item is fetched by ranges, up to `window` in flight, written in order: the partial file is always a
 *   prefix of the item, so an interrupted transfer resumes from its length (a partial file that is not a regular
 *   file, or is longer than the item, is removed first).
 */
import { createHash, hash } from "node:crypto";
import { closeSync, constants as fsConstants, createReadStream, fchmodSync, fstatSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { chmod, lstat, open, rename, stat, unlink } from "node:fs/promises";
import path from "node:path";
import { getLogger } from "../../shared/log.js";
import { isRsaPublicKeyPem } from "../../lib/pki/key-actions.js";
import { PART_PREFIX, chunkRanges, type Channel, type ManifestEntry } from "./manifest.js";

const log = getLogger("brine.cluster.state-sync");

/** A key file larger than this is not a key, bytes. */
export const keyBytesMax = 64 * 1024;

export type FetchRange = (off: number, len: number) => Promise<Uint8Array>;

/** What a rescan compares to tell an unchanged file: size, mtime and inode. */
export function sigOf(st: { size: number; mtimeMs: number; ino: number }): string {
  return `${st.size}:${st.mtimeMs}:${st.ino}`;
}

/** The sha256 of `b` in hex, one call (no Hash object and its native context an item: this runs for every item moved). */
export function sha256(b: Uint8Array): string {
  return hash("sha256", b, "hex");
}

/** `name` in directory `dir` (a checked segment: no separator, not `.` or `..`), without path.join's parse. */
export function inDir(dir: string, name: string): string {
  return dir.endsWith("/") ? dir + name : `${dir}/${name}`;
}

/** The partial file of item content `h` for `file`: named by the target and the content (items with the same bytes in one directory get their own). */
export function partFileOf(file: string, h: string): string {
  return partFileIn(path.dirname(file), path.basename(file), h);
}

/** partFileOf for the file `name` in directory `dir`. */
export function partFileIn(dir: string, name: string, h: string): string {
  return inDir(dir, `${PART_PREFIX}${hash("sha256", `${name}\0${h}`, "hex").slice(0, 32)}`);
}

function isKeyChannel(ch: Channel): boolean {
  return ch === "keys" || ch === "denied_keys";
}

/** `data`, the whole of item `e`, installed at `file` through `part`; returns the installed file's signature. */
export function installWhole(ch: Channel, e: ManifestEntry, data: Uint8Array, file: string, part: string): string {
  const got = sha256(data);
  if (data.byteLength !== e.s || got !== e.h) throw new Error(`sha256 ${got} does not match the manifest's ${e.h} (not installed)`);
  if (isKeyChannel(ch) && !isRsaPublicKeyPem(Buffer.from(data).toString("utf8"))) throw new Error(`not an RSA public key (not installed)`);
  let sig: string;
  try {
    // made here, never followed: a partial file left (or anything planted) at that name is removed, then made again
    const create = () => openSync(part, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o600);
    let fd: number;
    try {
      fd = create();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      unlinkSync(part);
      fd = create();
    }
    try {
      for (let off = 0; off < data.byteLength; ) off += writeSync(fd, data, off);
      fchmodSync(fd, e.m & 0o777);
      sig = sigOf(fstatSync(fd)); // the rename keeps inode, size and mtime
    } finally {
      closeSync(fd);
    }
    renameSync(part, file); // onto a directory: EISDIR, nothing replaced
  } catch (err) {
    try {
      unlinkSync(part);
    } catch {
      // not made, or renamed
    }
    throw (err as NodeJS.ErrnoException).code === "EISDIR" ? new Error("a directory is in the way") : err;
  }
  return sig;
}

/** Item `e` fetched by ranges (resuming `part`) and installed at `file`; the bytes fetched and the installed file's signature. */
export async function installByRanges(ch: Channel, e: ManifestEntry, fetch: FetchRange, chunk: number, window: number, file: string, part: string): Promise<{ fetched: number; sig: string }> {
  const hash = createHash("sha256");
  let from = 0;
  try {
    const st = await lstat(part);
    if (st.isFile() && st.size <= e.s) {
      from = st.size;
      for await (const c of createReadStream(part)) hash.update(c as Buffer);
      if (from > 0) log.info(`state-sync ${ch}: resuming ${e.p} at byte ${from} of ${e.s}`);
    } else await unlink(part);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const fh = await open(part, from > 0 ? "a" : "w", 0o600);
  let fetched = 0;
  try {
    // up to `window` ranges in flight, written in order: the partial file is always a prefix
    const ranges = chunkRanges(e.s, chunk, from);
    const inFlight: Promise<Uint8Array>[] = [];
    let next = 0;
    const fill = () => {
      while (inFlight.length < window && next < ranges.length) {
        const r = ranges[next++]!;
        const pr = fetch(r.off, r.len);
        pr.catch(() => undefined); // awaited in order below
        inFlight.push(pr);
      }
    };
    fill();
    while (inFlight.length) {
      const data = await inFlight.shift()!;
      await fh.write(data);
      hash.update(data);
      fetched += data.byteLength;
      fill();
    }
  } finally {
    await fh.close();
  }
  const got = hash.digest("hex");
  if (got !== e.h) {
    await unlink(part).catch(() => undefined);
    throw new Error(`sha256 ${got} does not match the manifest's ${e.h} (not installed)`);
  }
  if (isKeyChannel(ch)) {
    if (e.s > keyBytesMax || !isRsaPublicKeyPem(readFileSync(part, "utf8"))) {
      await unlink(part).catch(() => undefined);
      throw new Error(`not an RSA public key (not installed)`);
    }
  }
  await chmod(part, e.m & 0o777);
  try {
    await rename(part, file); // onto a directory: EISDIR, nothing replaced
  } catch (err) {
    await unlink(part).catch(() => undefined);
    throw (err as NodeJS.ErrnoException).code === "EISDIR" ? new Error("a directory is in the way") : err;
  }
  return { fetched, sig: sigOf(await stat(file)) };
}
