/**
 * The job list's entries (Salt's salt.utils.jid.format_jid_instance, what local_cache's get_jids gives
 * jobs.list_jobs), kept encoded: the job cache stores each job's entry as msgpack bytes when it stores the
 * job's load (bank `jobs/listed`, job-cache.ts), so listing 100,000 jobs is one range read of small byte
 * strings copied into one answer, with no decoding of 100,000 loads and no 100,000 objects to encode again.
 *
 * Pure: no I/O. The stored form is this module's encoding of `formatJob`; a change to what an entry holds
 * must rename the bank (older entries would be served as they are).
 */
import { BrineError } from "../../shared/errors.js";
import { jidToTime } from "../../shared/protocol/jid.js";
import { encodeWire, mapHeaderBytes, writeMapHeader } from "../../shared/protocol/msgpack.js";

/**
 * Salt's format_jid_instance: Function, Arguments, Target, Target-type, User, Metadata (the load's `metadata`,
 * else its `kwargs.metadata`, only when there is one), StartTime.
 */
export function formatJob(jid: string, load: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {
    Function: load.fun ?? "unknown-function",
    Arguments: load.arg ?? [],
    Target: load.tgt ?? "unknown-target",
    "Target-type": load.tgt_type ?? "list",
    User: load.user ?? "root",
  };
  const kwargs = load.kwargs;
  if ("metadata" in load) out.Metadata = load.metadata ?? {};
  else if (kwargs !== null && typeof kwargs === "object" && !Array.isArray(kwargs) && "metadata" in kwargs) out.Metadata = (kwargs as Record<string, unknown>).metadata ?? {};
  out.StartTime = jidToTime(jid);
  return out;
}

/** The stored entry of a job: `formatJob` msgpack-encoded. */
export function encodeListEntry(jid: string, load: Record<string, unknown>): Buffer {
  return encodeWire(formatJob(jid, load));
}

/** The map header of an encoded entry: its entry count and where its first key starts. */
function entryHead(entry: Uint8Array): { n: number; at: number } {
  const t = entry[0]!;
  if (t >= 0x80 && t <= 0x8f) return { n: t & 0x0f, at: 1 };
  if (t === 0xde) return { n: (entry[1]! << 8) | entry[2]!, at: 3 };
  throw new BrineError("STORE_DAMAGED", `a job list entry is not a map (type byte 0x${t.toString(16)})`);
}

const ENDTIME_KEY = encodeWire("EndTime");

/** An encoded entry with `EndTime` added last (local_cache's get_jids with job_cache_store_endtime). */
export function withEndtime(entry: Uint8Array, endtime: string): Buffer {
  const { n, at } = entryHead(entry);
  const value = encodeWire(endtime);
  const out = Buffer.allocUnsafe(mapHeaderBytes(n + 1) + entry.length - at + ENDTIME_KEY.length + value.length);
  let pos = writeMapHeader(out, 0, n + 1);
  out.set(entry.subarray(at), pos);
  pos += entry.length - at;
  out.set(ENDTIME_KEY, pos);
  out.set(value, pos + ENDTIME_KEY.length);
  return out;
}

/**
 * Writes a msgpack map of string keys to values already encoded as they come, each copied at once into one
 * growing buffer (nothing kept per entry: a 100,000-job list makes no 100,000 objects to collect): jobs.list_jobs's
 * {jid: entry}, jobs.lookup_jid's {minion id: return}. The map's header is a
 * map 32 whatever the count (msgpack allows it), written when the count is known.
 */
export class JobMapWriter {
  private out: Buffer;
  private pos = 5;
  private count = 0;

  constructor(bytesHint = 64 * 1024) {
    this.out = Buffer.allocUnsafeSlow(Math.max(64, bytesHint)); // its own ArrayBuffer, never a slice of the pool
  }

  private room(n: number): void {
    if (this.pos + n <= this.out.length) return;
    const bigger = Buffer.allocUnsafeSlow(Math.max(this.out.length * 2, this.pos + n));
    this.out.copy(bigger, 0, 0, this.pos);
    this.out = bigger;
  }

  /** Adds `jid` (any string key) with the value `bytes` holds encoded from `start` to its end. */
  add(jid: string, bytes: Uint8Array, start = 0): void {
    const n = Buffer.byteLength(jid, "utf8");
    const entryBytes = bytes.length - start;
    this.room(5 + n + entryBytes);
    const out = this.out;
    let pos = this.pos;
    if (n < 32) out[pos++] = 0xa0 | n;
    else if (n < 0x100) {
      out[pos++] = 0xd9;
      out[pos++] = n;
    } else if (n < 0x10000) {
      out[pos++] = 0xda;
      pos = out.writeUInt16BE(n, pos);
    } else {
      out[pos++] = 0xdb;
      pos = out.writeUInt32BE(n, pos);
    }
    if (n === jid.length) for (let i = 0; i < n; i++) out[pos++] = jid.charCodeAt(i); // ASCII (every jid): no native call
    else pos += out.write(jid, pos, n, "utf8");
    // copied in JS: a native copy of ~130 bytes would first make a view object of them
    for (let i = start; i < bytes.length; i++) out[pos++] = bytes[i]!;
    this.pos = pos;
    this.count++;
  }

  /** The map's bytes (a view of the writer's own ArrayBuffer, which holds nothing else; the writer is done). */
  finish(): Buffer {
    this.out[0] = 0xdf;
    this.out.writeUInt32BE(this.count, 1);
    return this.out.subarray(0, this.pos);
  }
}
