/**
 * `_file_recv`: files a minion pushes to the master (`cp.push`, `cp.push_dir`), as Salt's AESFuncs._file_recv
 * takes them: with `file_recv: True` only, each chunk `{id, path: [segments], loc, data}` written at `loc`
 * into `cachedir/minions/<id>/files/<path>`, none past `file_recv_max_size` MiB. The answer is Salt's: True for
 * a chunk written, False for anything refused (the minion's cp.push then stops, logs "cp.push Failed transfer
 * failed. Ensure master has 'file_recv' set to 'True' and that the file is not larger than the
 * 'file_recv_size_max' setting on the master." and returns False).
 *
 * Confinement (CVE-2024-38824 was a traversal here): the path is checked as data first (push-path.ts: no `..`,
 * not absolute, no NUL or control characters, bounded lengths), then on disk: every directory on the way is
 * created by this code or must be a real directory (a symlink is refused, wherever it points), and the file is
 * opened with O_NOFOLLOW and O_NONBLOCK (a symlink or a FIFO in its place is refused, never followed or waited
 * on) and must be a regular file. Salt checks symlinks only with `fileserver_followsymlinks: False`.
 *
 * Where brine differs from Salt: a chunk at `loc` beyond the file's current size is refused (Salt appends it,
 * which garbles the file); a file whose next chunk would pass the size limit is removed (Salt keeps the
 * truncated part); directories are made 0700 and files 0600 (Salt: the umask, "global read permissions").
 * Clustered, a file lands on the master that took its chunks; a minion whose chunks a balancer spreads over
 * several masters leaves parts on each (cachedir is per master).
 */
import { constants } from "node:fs";
import { lstat, mkdir, open, unlink } from "node:fs/promises";
import path from "node:path";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { validId } from "../../shared/protocol/ids.js";
import type { WireValue } from "../../shared/protocol/msgpack.js";
import { confinePushPath } from "./push-path.js";
import type { MasterContext } from "./context.js";
import type { AesResult } from "./aes-funcs.js";
import { shown } from "../../shared/shown.js";

const log = getLogger("brine.file_recv");
const refusals = new LogBudget(20, 60_000, (l) => log.warning(l), "refused file pushes");
/** what Salt logs at error (a bad loc, a file over the limit): budgeted too, a minion can send them in a loop */
const errors = new LogBudget(20, 60_000, (l) => log.error(l), "refused file pushes (errors)");

const MiB = 1024 * 1024;
const TRUE: AesResult = Object.freeze({ ret: true, mode: "send" }) as AesResult;
const FALSE: AesResult = Object.freeze({ ret: false, mode: "send" }) as AesResult;

function refuse(id: unknown, reason: string): AesResult {
  refusals.line(`_file_recv from ${shown(id)} refused: ${reason}`);
  return FALSE;
}

/** The directory a minion's pushed files land in. */
export function pushedFilesDir(cachedir: string, id: string): string {
  return path.join(cachedir, "minions", id, "files");
}

/**
 * Walks `dirs` under `root`: each must be a real directory (not a symlink); missing ones are made when
 * `create`. Returns the last directory, undefined when one is missing (and not created), or a refusal.
 */
async function walkDirs(root: string, dirs: readonly string[], create: boolean): Promise<string | undefined | { refused: string }> {
  let dir = root;
  for (const s of dirs) {
    dir = path.join(dir, s);
    let st = await lstat(dir).catch(() => undefined);
    if (!st) {
      if (!create) return undefined;
      await mkdir(dir, { mode: 0o700 }).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== "EEXIST") throw e;
      });
      st = await lstat(dir);
    }
    if (!st.isDirectory()) return { refused: `${path.relative(root, dir)} is ${st.isSymbolicLink() ? "a symlink" : "not a directory"}` };
  }
  return dir;
}

export async function doFileRecv(ctx: MasterContext, load: Record<string, WireValue>): Promise<AesResult> {
  const { id, loc, data } = load;
  if (!("id" in load) || !("path" in load) || !("loc" in load) || !Array.isArray(load.path)) return FALSE;
  if (!ctx.cfg.file_recv) return refuse(id, "file_recv is off in the master's configuration");
  if (!validId(id)) return FALSE;
  if (!("tok" in load)) return refuse(id, "no tok");
  if (typeof loc !== "number" || !Number.isSafeInteger(loc) || loc < 0) {
    errors.line(`Invalid file pointer from ${id}: loc ${shown(loc, 32)}`);
    return FALSE;
  }
  const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data instanceof Uint8Array ? Buffer.from(data.buffer, data.byteOffset, data.byteLength) : undefined;
  if (!bytes) return refuse(id, "data must be bytes or a string");
  const where = confinePushPath(load.path);
  if (!where.ok) return refuse(id, `Attempt to write received file outside of master cache directory! (${where.reason})`);
  const root = pushedFilesDir(ctx.cfg.cachedir, id);
  const rel = where.segments.join("/");
  const dirs = where.segments.slice(0, -1);
  const name = where.segments[where.segments.length - 1]!;
  const maxMiB = ctx.cfg.file_recv_max_size;
  if (loc + bytes.length > maxMiB * MiB) {
    // the part already written is useless: remove it (Salt leaves it, truncated)
    const dir = await walkDirs(root, dirs, false).catch(() => undefined);
    if (typeof dir === "string") {
      const st = await lstat(path.join(dir, name)).catch(() => undefined);
      if (st?.isFile()) await unlink(path.join(dir, name)).catch(() => {});
    }
    errors.line(`file_recv_max_size limit of ${maxMiB} MiB exceeded! ${rel} from ${id} refused, and its part removed. To successfully push this file, adjust file_recv_max_size to an integer (in MiB) large enough to accommodate it.`);
    return FALSE;
  }
  try {
    await mkdir(root, { recursive: true, mode: 0o700 });
    const dir = await walkDirs(root, dirs, true);
    if (typeof dir !== "string") return refuse(id, `Attempt to write received file outside of master cache directory! (${dir?.refused ?? "missing directory"})`);
    const flags = constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | (loc === 0 ? constants.O_CREAT | constants.O_TRUNC : 0);
    const fh = await open(path.join(dir, name), flags, 0o600);
    try {
      const st = await fh.stat();
      if (!st.isFile()) return refuse(id, `${rel} is not a regular file`);
      if (loc > st.size) return refuse(id, `chunk at ${loc} is past the end of ${rel} (${st.size} bytes): a chunk is missing`);
      if (bytes.length) await fh.write(bytes, 0, bytes.length, loc);
    } finally {
      await fh.close();
    }
    return TRUE;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === "ELOOP") return refuse(id, `Attempt to write received file outside of master cache directory! (${rel} is a symlink)`);
    if (err.code === "ENOENT" && loc > 0) return refuse(id, `chunk at ${loc} of ${rel}, which has no first chunk`);
    if (err.code === "ENXIO" || err.code === "EISDIR") return refuse(id, `${rel} is not a regular file`);
    errors.line(`_file_recv from ${id}: ${rel} could not be written: ${err.message}`);
    return FALSE;
  }
}
