/**
 * The state-sync sources that are not directories (in the state-sync thread): the indexed key store
 * (`keys.cache_driver: mmap_key`) for the key channels, and the job cache's banks (`bank:jobs/loads` …), paged
 * straight from LMDB (nothing kept in memory; an item is a key, its content the value in the one CBOR codec).
 * The directory channels and what every source shares are in sources.ts.
 */
import type { Database } from "lmdb";
import { cbor } from "../../shared/cbor.js";
import { getLogger } from "../../shared/log.js";
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

/** A job-cache bank: LMDB keys are the items; the content is the value in the one CBOR codec. */
export class BankSource implements Source {
  constructor(
    readonly ch: Channel,
    private readonly db: Database<unknown, string>,
  ) {}

  async scan(): Promise<void> {}

  private bytesOf(p: string): Uint8Array | undefined {
    const v = this.db.get(p);
    return v === undefined ? undefined : (cbor.encode(v) as Uint8Array);
  }

  entry(p: string): ManifestEntry | undefined {
    const b = this.bytesOf(p);
    return b === undefined ? undefined : { p, s: b.byteLength, h: sha256(b), m: 0, t: 0 };
  }

  async page(after: string | undefined, n: number): Promise<{ entries: ManifestEntry[]; more: boolean }> {
    const entries: ManifestEntry[] = [];
    let more = false;
    for (const { key, value } of this.db.getRange(after === undefined ? {} : { start: after })) {
      if (after !== undefined && key === after) continue;
      if (entries.length === n) {
        more = true;
        break;
      }
      if (typeof key !== "string") continue;
      const b = cbor.encode(value) as Uint8Array;
      entries.push({ p: key, s: b.byteLength, h: sha256(b), m: 0, t: 0 });
    }
    return { entries, more };
  }

  async read(p: string, h: string | undefined, off: number, len: number): Promise<Uint8Array> {
    const b = this.bytesOf(p);
    if (!b) throw new Error(`${p} is not here`);
    if (h !== undefined && sha256(b) !== h) throw new Error(`${p} changed here since that manifest`);
    return b.subarray(off, off + len);
  }

  async install(e: ManifestEntry, fetch: FetchRange, chunk: number): Promise<number> {
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
