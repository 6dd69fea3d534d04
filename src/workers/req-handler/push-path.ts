/**
 * Where a file a minion pushes (`cp.push`, `cp.push_dir`: the `_file_recv` request) may land, as a pure
 * module: the request's `path` list in, the relative path segments under `cachedir/minions/<id>/files` out,
 * or why it is refused. No I/O: the handler (file-recv.ts) then checks the directories on disk (symlinks).
 *
 * Salt (salt/master.py AESFuncs._file_recv) joins the list with the separator, normalises it, refuses an
 * absolute result, and checks with clean_path that the joined path stays under the minion's directory;
 * CVE-2024-38824 was a traversal there. brine is stricter and simpler: it never resolves `..`, it refuses it.
 * - `path` must be a non-empty list of strings; each may hold `/` (Salt joins then normalises, so `a/b` is two
 *   segments); empty and `.` segments are dropped (normalisation);
 * - refused: a result that is absolute (a leading empty element or `/`, as Salt refuses), any `..` segment
 *   (Salt resolved `a/../b` to `b`), a NUL or any other control character, a segment over 255 bytes (a file
 *   name the filesystem refuses), more than `pushSegmentsMax` segments or over `pushPathBytesMax` bytes in all,
 *   and a path with nothing left.
 */

/** Most segments in a pushed file's path. */
export const pushSegmentsMax = 64;
/** Longest pushed relative path, bytes (UTF-8, joined with `/`). */
export const pushPathBytesMax = 1024;
/** Longest segment (a file or directory name), bytes: NAME_MAX of the common filesystems. */
export const pushSegmentBytesMax = 255;

export type PushPath = { ok: true; segments: string[] } | { ok: false; reason: string };

// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x1f\x7f]/;

export function confinePushPath(path: unknown): PushPath {
  if (!Array.isArray(path) || path.length === 0) return { ok: false, reason: "path must be a non-empty list" };
  if (!path.every((p): p is string => typeof p === "string")) return { ok: false, reason: "path elements must be strings" };
  const joined = path.join("/");
  if (joined.startsWith("/")) return { ok: false, reason: "absolute path" };
  if (CONTROL.test(joined)) return { ok: false, reason: joined.includes("\0") ? "NUL in path" : "control character in path" };
  const segments: string[] = [];
  for (const s of joined.split("/")) {
    if (s === "" || s === ".") continue;
    if (s === "..") return { ok: false, reason: "'..' in path" };
    if (Buffer.byteLength(s, "utf8") > pushSegmentBytesMax) return { ok: false, reason: `a path segment is over ${pushSegmentBytesMax} bytes` };
    segments.push(s);
  }
  if (segments.length === 0) return { ok: false, reason: "empty path" };
  if (segments.length > pushSegmentsMax) return { ok: false, reason: `more than ${pushSegmentsMax} path segments` };
  if (Buffer.byteLength(segments.join("/"), "utf8") > pushPathBytesMax) return { ok: false, reason: `path over ${pushPathBytesMax} bytes` };
  return { ok: true, segments };
}
