/**
 * `_serve_file` chunks: up to `file_buffer_size` bytes from offset `loc` of a found file, gzip'ed
 * (`salt.utils.gzip_util.compress`, a gzip member at the requested level) when the minion asks.
 * The file is opened by its real path (already checked to be inside its root) for each chunk.
 */
import { open } from "node:fs/promises";
import { gzip as gzipCb } from "node:zlib";
import { promisify } from "node:util";

const gzip = promisify(gzipCb);

/** A `loc` as Salt accepts it: a non-negative integer offset; anything else is refused. */
export function chunkOffset(loc: unknown): number | null {
  if (typeof loc === "bigint") return loc >= 0n && loc <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(loc) : null;
  if (typeof loc === "number" && Number.isSafeInteger(loc) && loc >= 0) return loc;
  return null;
}

/** The gzip level the minion asked for (1–9), or null for a plain chunk. */
export function gzipLevel(v: unknown): number | null {
  const n = typeof v === "string" && /^\d$/.test(v) ? Number(v) : typeof v === "bigint" ? Number(v) : v;
  return typeof n === "number" && Number.isInteger(n) && n >= 1 && n <= 9 ? n : null;
}

export async function readChunk(real: string, loc: number, size: number): Promise<Buffer> {
  const fh = await open(real, "r");
  try {
    const buf = Buffer.allocUnsafe(size);
    let got = 0;
    while (got < size) {
      const { bytesRead } = await fh.read(buf, got, size - got, loc + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return buf.subarray(0, got);
  } finally {
    await fh.close();
  }
}

export function compressChunk(data: Buffer, level: number): Promise<Buffer> {
  return gzip(data, { level });
}
