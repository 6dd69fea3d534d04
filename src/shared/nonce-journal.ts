/**
 * The replay nonce set on disk, so a captured request frame is refused after a restart too (issue #13).
 *
 * One append-only file per generation of the NonceSet (nonce-set.ts), `nonces.<generation>` in this master's
 * own LMDB directory (local disk, never shared by two masters): a 16-byte header (magic, the time the
 * generation began) and the packed nonces (8 bytes each) appended in no particular order.
 *
 * - Each request worker appends the nonces its batch accepted (one write per batch, before the batch's replies
 *   leave: a reply implies its nonce is in the file; a page-cache write, so a SIGKILL loses nothing, a crash
 *   of the machine what the kernel had not flushed).
 * - The main thread appends what peers report (src/main-thread/cluster/forwarding.ts), creates the next generation's file
 *   before the set swaps generations, and deletes the file of the generation the swap forgot.
 * - At start, before any worker runs, the files of the last two generations still inside their memory span
 *   (two windows from their start) are read back into the current table and rewritten into a fresh file.
 *
 * A file that is short, misaligned or without the magic loses only its unreadable part.
 */
import { closeSync, constants, fstatSync, openSync, readdirSync, readFileSync, readSync, rmSync, writeSync } from "node:fs";
import path from "node:path";
import { getLogger } from "./log.js";
import { NONCE_PACKED_BYTES, type NonceSet } from "./nonce-set.js";
import { LogBudget } from "./log-budget.js";
import { NONCE_FRESH, decideAsk } from "./nonce-owner.js";

const log = getLogger("brine.nonces");
/** one line per 10 s for this flood, then a count of what was held back */
const journalLog = new LogBudget(1, 10_000, (line) => log.warning(line), "replay nonce journal");

const MAGIC = Buffer.from("BRNONCE1", "latin1");
export const nonceFileHeaderBytes = 16;
const FILE_RE = /^nonces\.(\d{1,9})$/;
/** one journal file read back at start, at most (a larger one is read up to this), bytes */
const journalFileBytesMax = 256 * 1024 * 1024;

export function nonceFile(dir: string, generation: number): string {
  return path.join(dir, `nonces.${generation}`);
}

function header(startMs: number): Buffer {
  const b = Buffer.alloc(nonceFileHeaderBytes);
  MAGIC.copy(b, 0);
  b.writeDoubleLE(startMs, 8);
  return b;
}

/** The main thread's side: load at start, generation swaps, peers' nonces. */
export class NonceJournal {
  private readonly appender: NonceAppender;
  private failures = 0;

  constructor(
    private readonly dir: string,
    private readonly set: NonceSet,
    /** one generation's length (the NonceSet's window), ms */
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.appender = new NonceAppender(dir, set);
  }

  /**
   * At start, before any worker runs: reads the journal back into the set and starts a new generation whose
   * file holds them. Returns the nonces restored.
   */
  load(): number {
    let names: string[] = [];
    try {
      names = readdirSync(this.dir);
    } catch {
      // no directory yet: nothing to restore
    }
    const t = this.now();
    const files: { gen: number; start: number; file: string; body: Uint8Array }[] = [];
    for (const name of names) {
      const m = FILE_RE.exec(name);
      if (!m) continue;
      const file = path.join(this.dir, name);
      let b: Buffer = Buffer.alloc(0);
      try {
        b = readFileSync(file);
      } catch (e) {
        log.warning(`replay nonces in ${file} could not be read: ${(e as Error).message}`);
      }
      const ok = b.byteLength >= nonceFileHeaderBytes && b.subarray(0, 8).equals(MAGIC);
      const body = b.subarray(nonceFileHeaderBytes, Math.min(b.byteLength, journalFileBytesMax));
      files.push({ gen: Number(m[1]), start: ok ? b.readDoubleLE(8) : NaN, file, body: body.subarray(0, body.byteLength - (body.byteLength % NONCE_PACKED_BYTES)) });
    }
    // a generation's nonces are remembered up to two windows from its start; the two newest at most
    const keep = files.filter((f) => Number.isFinite(f.start) && t - f.start < 2 * this.windowMs && f.start <= t + this.windowMs).sort((a, b) => b.gen - a.gen).slice(0, 2);
    const gen = files.reduce((g, f) => Math.max(g, f.gen), 0) + 1;
    this.set.startAt(gen);
    let count = 0;
    for (const f of keep) count += this.set.insertPacked(f.body);
    this.createFile(gen, t);
    for (const f of keep) this.append(f.body);
    for (const f of files) rmSync(f.file, { force: true });
    if (count) log.info(`restored ${count} replay nonces from before the restart`);
    return count;
  }

  /** The file of generation `gen`, with its header (before the generation becomes current). */
  private createFile(gen: number, startMs: number): void {
    const file = nonceFile(this.dir, gen);
    try {
      const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
      try {
        writeSync(fd, header(startMs));
      } finally {
        closeSync(fd);
      }
    } catch (e) {
      this.failures++;
      journalLog.line(`replay nonce journal: creating ${file} failed (${(e as Error).message}); a restart may accept a frame seen before it`);
    }
  }

  /** Every window (instead of NonceSet.rotate): the next generation's file, the swap, the forgotten file gone. */
  rotate(): void {
    const next = this.set.generation() + 1;
    this.createFile(next, this.now());
    this.set.rotate();
    rmSync(nonceFile(this.dir, next - 2), { force: true });
  }

  /** A peer's accepted nonces (packed): recorded in the set and the journal. */
  peer(bytes: Uint8Array): void {
    if (this.set.insertPacked(bytes) > 0) this.append(bytes);
  }

  /**
   * A peer's nonce owner ask (src/shared/nonce-owner.ts; a body badAsk accepted): one verdict per nonce by this
   * set's check-and-insert; the fresh ones are journaled (one write), so a restart of this decider still refuses them.
   */
  decide(bytes: Uint8Array): Uint8Array {
    const v = decideAsk(bytes, (hi, lo) => this.set.insertWords(hi, lo));
    let fresh = 0;
    for (const x of v) if (x === NONCE_FRESH) fresh++;
    if (fresh === v.length) this.append(bytes);
    else if (fresh > 0) {
      const out = new Uint8Array(fresh * NONCE_PACKED_BYTES);
      let at = 0;
      v.forEach((x, i) => {
        if (x !== NONCE_FRESH) return;
        out.set(bytes.subarray(i * NONCE_PACKED_BYTES, (i + 1) * NONCE_PACKED_BYTES), at);
        at += NONCE_PACKED_BYTES;
      });
      this.append(out);
    }
    return v;
  }

  private append(bytes: Uint8Array): void {
    this.appender.append(bytes);
  }

  close(): void {
    this.appender.close();
  }
}

/** A request worker's side: appends its batches' accepted nonces to the current generation's file. */
export class NonceAppender {
  private fd: number | undefined;
  private gen = -1;
  private failures = 0;

  constructor(
    private readonly dir: string,
    private readonly set: NonceSet,
  ) {}

  append(bytes: Uint8Array): void {
    if (bytes.byteLength === 0) return;
    const g = this.set.generation();
    try {
      if (g !== this.gen) {
        if (this.fd !== undefined) closeSync(this.fd);
        this.fd = undefined;
        this.gen = g;
        // the main thread created the file (with its header) before it made the generation current
        this.fd = openSync(nonceFile(this.dir, g), constants.O_WRONLY | constants.O_APPEND);
      }
      if (this.fd !== undefined) writeSync(this.fd, bytes);
    } catch (e) {
      this.failures++;
      journalLog.line(`replay nonce journal: appending to generation ${g} failed (${(e as Error).message}); a restart may accept a frame seen before it`);
    }
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
    this.gen = -1;
  }
}

/**
 * For a peer's bulk sync: up to `max` bytes of packed nonces from the journal files of generations
 * `current - 1` and `current`, from the position `after` (`<generation>:<offset>`, from the start when absent);
 * `next` is where the following chunk starts (undefined: both files read).
 */
export function readNonceChunk(dir: string, current: number, after: string | undefined, max: number): { b: Uint8Array | undefined; next: string | undefined } {
  const m = after === undefined ? undefined : /^(\d{1,9}):(\d{1,12})$/.exec(after);
  let gen = m ? Math.max(Number(m[1]), current - 1) : current - 1;
  let offset = m && Number(m[1]) === gen ? Math.max(Number(m[2]), nonceFileHeaderBytes) : nonceFileHeaderBytes;
  const want = max - (max % NONCE_PACKED_BYTES);
  for (; gen <= current; gen++, offset = nonceFileHeaderBytes) {
    let fd: number;
    try {
      fd = openSync(nonceFile(dir, gen), "r");
    } catch {
      continue; // no such generation (yet, or any more)
    }
    try {
      const left = fstatSync(fd).size - offset;
      if (left < NONCE_PACKED_BYTES) continue;
      const buf = Buffer.allocUnsafe(Math.min(want, left - (left % NONCE_PACKED_BYTES)));
      const n = readSync(fd, buf, 0, buf.byteLength, offset);
      const usable = n - (n % NONCE_PACKED_BYTES);
      if (usable === 0) continue;
      return { b: buf.subarray(0, usable), next: `${gen}:${offset + usable}` };
    } finally {
      closeSync(fd);
    }
  }
  return { b: undefined, next: undefined };
}
