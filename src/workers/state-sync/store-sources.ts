/**
 * The state-sync sources that are not directories (in the state-sync thread): the indexed key store
 * (`keys.cache_driver: mmap_key`) for the key channels, and the job cache's banks (`bank:jobs/loads` …), paged
 * straight from LMDB (nothing kept in memory; an item is a key, its content the value in the one CBOR codec).
 * The directory channels and what every source shares are in sources.ts.
 */
import type { Database } from "lmdb";
import { cbor } from "../../shared/cbor.js";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { isRsaPublicKeyPem } from "../../lib/pki/key-actions.js";
import type { KeyState, KeyStore } from "../../lib/pki/key-store.js";
import { afterScan, checkItemPath, chunkRanges, type Channel, type ManifestEntry } from "./manifest.js";
import { scanWriteBatch, toEntry, toStored, walkDb, type ManifestDb, type ScanWrite, type Stored } from "./manifest-store.js";
import { DirSource, type Source } from "./sources.js";
import { keyBytesMax, sha256, type FetchRange } from "./dir-install.js";

const log = getLogger("brine.cluster.state-sync");

/**
 * A key channel over the indexed key store (`keys.cache_driver: mmap_key`, src/lib/pki/key-store.ts), which is
 * then the source of truth instead of the directories: items and checks as DirSource's, the store's own sha256
 * as the signature, a scan skipped while the store's generation is unchanged (so the engine's timer scans it
 * every tick), and a changed or new key stamped when the scan sees it.
 */
export class IndexedKeySource extends DirSource {
  override readonly cheapScan = true;
  private keysGeneration: number | undefined;

  constructor(
    ch: Channel,
    private readonly keys: KeyStore,
    db: ManifestDb,
    legacyFile: string,
    now: () => number = Date.now,
  ) {
    super(ch, () => [], () => ({ error: "not a directory channel" }), db, legacyFile, now);
  }

  private states(): KeyState[] {
    return this.ch === "denied_keys" ? ["denied"] : ["accepted", "pending", "rejected"];
  }

  protected override async doScan(): Promise<void> {
    const gen = this.keys.generation();
    if (gen !== undefined && gen === this.keysGeneration) return;
    this.keysGeneration = gen;
    const now = this.now();
    const ops: ScanWrite[] = [];
    // what the store holds, item by item against the manifest; then the manifest's items the store no longer holds
    for (const state of this.states()) {
      for (const id of this.keys.list(state)) {
        this.writable();
        const p = `${state}/${id}`;
        if ("error" in checkItemPath(this.ch, p)) continue;
        const sha = this.keys.digest(state, id);
        if (sha === undefined) continue;
        const v = this.db.get(p);
        if (v && !v.d && v.g === sha) continue;
        const pub = this.keys.read(state, id) ?? "";
        ops.push({ p, was: v, next: { s: Buffer.byteLength(pub), h: sha, m: 0o644, t: now, g: sha } });
        if (ops.length >= scanWriteBatch) this.apply(ops);
      }
    }
    this.apply(ops);
    for (const [p, v] of walkDb(this.db)) {
      const [state, id] = [p.slice(0, p.indexOf("/")), p.slice(p.indexOf("/") + 1)];
      if (!v.d && this.keys.digest(state as KeyState, id) !== undefined) continue;
      const next = afterScan(toEntry(p, v), undefined, now);
      if (!next) ops.push({ p, was: v, next: undefined });
      else if (next.t !== v.t || next.d !== v.d) ops.push({ p, was: v, next: toStored(next) });
      if (ops.length >= scanWriteBatch) this.apply(ops);
    }
    this.apply(ops);
  }

  private parts(p: string): [KeyState, string] {
    const c = checkItemPath(this.ch, p);
    if ("error" in c) throw new Error(`refused path ${JSON.stringify(p)}: ${c.error}`);
    return [c.parts[0] as KeyState, c.parts[1]!];
  }

  override async read(p: string, h: string | undefined, off: number, len: number): Promise<Uint8Array> {
    const [state, id] = this.parts(p);
    const pub = this.keys.read(state, id);
    if (pub === undefined) throw new Error(`${p} is not here`);
    const b = Buffer.from(pub, "utf8");
    if (h !== undefined && sha256(b) !== h) throw new Error(`${p} changed here since that manifest`);
    return b.subarray(off, off + len);
  }

  override async install(e: ManifestEntry, fetch: FetchRange, chunk: number): Promise<number> {
    this.parts(e.p);
    if (e.s > keyBytesMax) throw new Error("not an RSA public key (not installed)");
    const parts: Uint8Array[] = [];
    for (const r of chunkRanges(e.s, chunk)) parts.push(await fetch(r.off, r.len));
    const all = Buffer.concat(parts);
    this.put(e.p, this.placeWhole(e, all));
    return all.byteLength;
  }

  /** A key, whole, written into the key store (installBatch records a batch of them in one commit). */
  protected override placeWhole(e: ManifestEntry, data: Uint8Array, _checked?: Set<string>): Stored {
    const [state, id] = this.parts(e.p);
    if (e.s > keyBytesMax || data.byteLength > keyBytesMax) throw new Error("not an RSA public key (not installed)");
    if (sha256(data) !== e.h) throw new Error("sha256 does not match the manifest's (not installed)");
    const pub = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("utf8");
    if (!isRsaPublicKeyPem(pub)) throw new Error("not an RSA public key (not installed)");
    this.keys.write(state, id, pub);
    return { s: e.s, h: e.h, m: e.m, t: e.t, g: e.h };
  }

  override async remove(e: ManifestEntry): Promise<void> {
    const [state, id] = this.parts(e.p);
    this.keys.remove(state, id);
    this.adopt(e);
  }
}

/**
 * One job-cache record a bank channel moves at most, as LMDB stores it, bytes. The state-sync thread runs under a
 * small heap bound (src/main-thread/state-sync-host.ts stateSyncHeapLimits) and an item is decoded and encoded whole
 * to be hashed and served: a larger record (a large return) is listed with its stored size and refused when asked
 * for, one error per item in the puller's report and a log line here, never decoded (a 64 MiB return decoded in this
 * heap would end the thread, or the process: V8 treats a bound reached through a large buffer as fatal). Such a job
 * still reaches the other masters through the mirror (its events, forwarded; the bulk sync's own bound,
 * job-records.ts syncJobRecordBytesMax).
 */
export const bankItemBytesMax = 256 * 1024;
/** one line per 10 s for this flood, then a count of what was held back */
/**
 * The hash listed for an item stored larger than bankItemBytesMax: not a sha256 of anything (a puller never installs
 * the item; asked for, it is refused).
 */
const tooLargeHash = "0".repeat(64);
/** what the one CBOR codec's encoding of a record may add to its stored size (both are CBOR of the same value), bytes */
const bankItemSlackBytes = 64 * 1024;
const oversizeLog = new LogBudget(1, 10_000, (line) => log.warning(line), "state-sync bank items");

/** A job-cache bank: LMDB keys are the items; the content is the value in the one CBOR codec. */
export class BankSource implements Source {
  constructor(
    readonly ch: Channel,
    private readonly db: Database<unknown, string>,
  ) {}

  async scan(): Promise<void> {}

  /** The entry of `p`, from its value's bytes in the one CBOR codec; an item stored larger than bankItemBytesMax is not decoded. */
  private entryOf(p: string): { e: ManifestEntry; b?: Uint8Array } | undefined {
    // its stored bytes, not decoded (a view: of LMDB's map for a large value; `length`, not `byteLength`, is the value's)
    const stored = this.db.getBinaryFast(p)?.length;
    if (stored === undefined) return undefined;
    if (stored > bankItemBytesMax) return { e: { p, s: stored, h: tooLargeHash, m: 0, t: 0 } };
    const b = cbor.encode(this.db.get(p)) as Uint8Array;
    return { e: { p, s: b.byteLength, h: sha256(b), m: 0, t: 0 }, b };
  }

  entry(p: string): ManifestEntry | undefined {
    return this.entryOf(p)?.e;
  }

  async page(after: string | undefined, n: number): Promise<{ entries: ManifestEntry[]; more: boolean }> {
    const entries: ManifestEntry[] = [];
    let more = false;
    for (const key of this.db.getKeys(after === undefined ? {} : { start: after })) {
      if (after !== undefined && key === after) continue;
      if (entries.length === n) {
        more = true;
        break;
      }
      if (typeof key !== "string") continue;
      const x = this.entryOf(key);
      if (x) entries.push(x.e);
    }
    return { entries, more };
  }

  async read(p: string, h: string | undefined, off: number, len: number): Promise<Uint8Array> {
    const x = this.entryOf(p);
    if (!x) throw new Error(`${p} is not here`);
    if (!x.b) {
      oversizeLog.line(`state-sync ${this.ch}: ${p} not sent: ${x.e.s} bytes stored, more than a bank item may be (${bankItemBytesMax})`);
      throw new Error(`too large for a state-sync bank transfer: ${x.e.s} bytes stored, at most ${bankItemBytesMax}`);
    }
    if (h !== undefined && x.e.h !== h) throw new Error(`${p} changed here since that manifest`);
    return x.b.subarray(off, off + len);
  }

  async install(e: ManifestEntry, fetch: FetchRange, chunk: number): Promise<number> {
    // a peer of an earlier version lists and sends any size: what this heap must not decode is refused before a byte is fetched
    if (e.s > bankItemBytesMax + bankItemSlackBytes) throw new Error(`too large for a state-sync bank transfer: ${e.s} bytes, at most ${bankItemBytesMax}`);
    const parts: Uint8Array[] = [];
    for (const r of chunkRanges(e.s, chunk)) parts.push(await fetch(r.off, r.len));
    const all = Buffer.concat(parts);
    if (sha256(all) !== e.h) throw new Error(`sha256 does not match the manifest's (not installed)`);
    // only what is missing here (policy "add"): never overwrite a record this master has
    const ok = await this.db.ifNoExists(e.p, () => this.db.put(e.p, cbor.decode(all)));
    if (!ok) log.debug(`state-sync ${this.ch}: ${e.p} was written here meanwhile; kept`);
    return all.byteLength;
  }

  async remove(): Promise<void> {}
  adopt(): void {}
  digest(): string {
    return "";
  }
  async stop(): Promise<void> {}
}
