/**
 * State-sync transfers (issue 15), in the state-sync thread: keys, denied keys, file_roots, pillar_roots and the
 * job-cache banks between masters, over the peer channel the main thread relays (this thread has no socket:
 * every peer request goes out as `{k: "req"}` on its port to the main thread, and a peer's request comes in as
 * `{k: "in"}`; src/main-thread/cluster/state-sync-link.ts).
 *
 * A transfer from a peer, per channel: the peer's manifest in pages (pullPageItems), each page diffed against this
 * master's (manifest.ts; on the wire each hash as its 32 bytes), tombstoned items removed, then only what differs (held as bytes: entry-list.ts)
 * fetched: small items whole and batched (at most chunkBytesMax a request; asked by path alone and answered in order
 * with their bytes alone, checked against the manifest's size and sha256, a mismatch fetched again by ranges; fetchBatchItems a request),
 * large ones in chunkBytesMax ranges, requestsInFlightMax requests in flight, each range's sha256 checked (fetched again up to
 * rangeAttemptsMax times), the whole item's sha256 checked before it is renamed into place (sources.ts). Replies to
 * manifest and fetch requests (answered by serve.ts) are deflated for a puller that says it reads them (`z: 1`; wire.ts: not the ranges of
 * large items), which takes a keys-only join from 1.24× the keys' bytes on the wire to about 0.7×. In flight: requestsInFlightMax × chunkBytesMax plus one manifest page (a directory channel's own manifest is in LMDB, read as it goes: memory does not grow with the channel's size).
 * A resync sends about what changed: when the digests differ and the peer has many items, it answers the first
 * request with a range summary and the puller walks down a tree of them, summarising again only the stretches whose
 * content differs here and paging the small ones (range-tree.ts: a one-item change at 100k items costs about 6 KiB;
 * `r: 1` says the puller reads summaries, `t: 1` trees; a peer of an earlier version gets or sends the flat summary,
 * or pages). One log
 * line per transfer that changed something: `state-sync <channel> from <peer>: installed N items (B bytes),
 * deleted D`; every refused path is logged (within a LogBudget).
 *
 * Who starts transfers:
 * - keys and denied keys converge by themselves: every keysTickMs the key directories are rescanned when a
 *   watcher saw a change (and fully every keysRescanMs; neither while a pull of the channel installs into it, which
 *   is rescanned once when the pull ends), and a changed digest is announced to every peer
 *   (`changed`, also every announceMs unchanged); a peer whose last transfer from us saw another digest pulls.
 *   A peer coming up is pulled from. With a shared key directory (the probe: the serving master writes a fresh
 *   random token beside the keys, the puller reads it from its own directory) nothing is transferred.
 * - `cluster.sync_roots` asks every peer to pull the roots from this master (`pull`), `cluster.collect_from_peers`
 *   pulls from every peer; both answer per peer when each is done. The join awaits `syncFrom`.
 * - Every finished transfer updates `cachedir/brine-state-sync/status.json` (replaced atomically) for
 *   `cluster.health`, the metrics and `brine.stats`: `{channel: {peer: StatusEntry}}` (the last transfer, the sums,
 *   and since when a peer's announced key content is not here).
 */
import { randomBytes } from "node:crypto";
import { readFileSync, renameSync, watch, writeFileSync, type FSWatcher } from "node:fs";
import path from "node:path";
import type { MessagePort } from "node:worker_threads";
import type { RootDatabase } from "lmdb";
import { cbor, ownBytes } from "../../shared/cbor.js";
import { portError, revivePortError } from "../../shared/port-calls.js";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { minionPkiDir } from "../../shared/shared-fs.js";
import { validId } from "../../shared/protocol/ids.js";
import type { Store } from "../../lib/store/lmdb-env.js";
import { announceMs, chunkBytesMax, fetchBatchItems, keysRescanMs, keysTickMs, pullPageItems, pullTimeoutMs, rangeAttemptsMax, requestTimeoutMs, STATUS_DIR, requestsInFlightMax, wireForm, probeName, type EngineCall, type FromEngine, type PeerMsg, type PeerReport, type Piece, type ToEngine } from "./messages.js";
import { KEY_CHANNELS, checkItemPath, diffPage, entryFromWire, parseChannel, policyOf, validEntry, type Channel, type ManifestEntry } from "./manifest.js";
import { EntryList } from "./entry-list.js";
import { SummaryWalk, subRequest, summaryFromWire } from "./range-tree.js";
import { DirSource, SourceStopped, dirLayout, type Source } from "./sources.js";
import { sha256 } from "./dir-install.js";
import { unpackReply } from "./wire.js";
import { serveGet, serveManifest } from "./serve.js";
import { SyncStatusFile } from "./sync-status.js";
import { BankSource, IndexedKeySource } from "./store-sources.js";
import { manifestDb, openManifests, scratchDb } from "./manifest-store.js";
import { KEY_DIRS, keyCacheDriver, keyStoreFor } from "../../lib/pki/key-store.js";

const log = getLogger("brine.cluster.state-sync");
const refusals = new LogBudget(20, 10_000, (line) => log.warning(line), "state-sync refusals");

/** Error texts kept per peer report, count. */
const reportErrorsMax = 20;

/** The peer could not be asked (as opposed to an item it sent being refused here). */
class TransferError extends Error {}

function emptyReport(): PeerReport {
  return { items: 0, bytes: 0, deleted: 0, errors: [], ms: 0 };
}

function addError(r: PeerReport, e: string): void {
  if (r.errors.length < reportErrorsMax) r.errors.push(e);
  else if (r.errors.length === reportErrorsMax) r.errors.push("(more errors not listed)");
}

/** A peer's answer to a manifest request: a page, `same`, or (a first request with `r: 1`) a range summary. */
interface ManifestReply {
  entries?: unknown[];
  more?: unknown;
  probe?: unknown;
  same?: unknown;
  w?: unknown;
  sum?: unknown[];
}

/** The test hook's end: holds ever more memory until V8 stops the thread at its heap bound (ERR_WORKER_OUT_OF_MEMORY). */
function fillHeap(): never {
  const held: unknown[] = [];
  for (;;) held.push(new Array(4096).fill(held.length));
}

/** Channel names from a caller: each parsed, or an error naming the bad one. */
export function parseChannels(names: readonly unknown[]): Channel[] {
  return names.map((n) => {
    const ch = parseChannel(n);
    if (!ch) throw new Error(`unknown state-sync channel ${JSON.stringify(n)}`);
    return ch;
  });
}

export class StateSyncEngine {
  private readonly sources = new Map<Channel, Source>();
  /** the directory channels' manifests (sources.ts openManifests), opened at first use */
  private manifests: RootDatabase | undefined;
  private up = new Set<string>();
  private known: string[] = [];
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (b: Uint8Array) => void; reject: (e: Error) => void }>();
  /** per `peer\0channel`: the transfer running or queued (transfers of one pair never overlap) */
  private readonly chains = new Map<string, Promise<unknown>>();
  /** per `peer\0channel`: an automatic pull is queued and not started */
  private readonly queued = new Set<string>();
  /** per `peer\0channel`: the digest the peer announced when we last pulled because of it */
  private readonly pulledDigest = new Map<string, string>();
  /** key channels: the digest last announced, when, which need a rescan */
  private readonly announced = new Map<Channel, { digest: string; at: number }>();
  private readonly dirty = new Set<Channel>(KEY_CHANNELS);
  /** pulls running per channel: the timer neither rescans nor announces a key channel while a pull installs into it */
  private readonly pulling = new Map<Channel, number>();
  private lastFullScan = 0;
  private readonly watchers: FSWatcher[] = [];
  private readonly timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private readonly status: SyncStatusFile;
  private closed = false;

  constructor(
    private readonly cfg: MasterConfig,
    private readonly nodeId: string,
    private readonly store: Store,
    private readonly port: MessagePort,
    opts: { autoKeys?: boolean; now?: () => number; testOomAfterItems?: number } = {},
  ) {
    this.now = opts.now ?? Date.now;
    this.oomAfterItems = opts.testOomAfterItems;
    this.status = new SyncStatusFile(cfg.cachedir, this.now);
    port.on("message", (m: ToEngine) => this.onMain(m));
    if (opts.autoKeys !== false) {
      // with the indexed key store the directories are not used: its generation is read every tick instead
      if (keyCacheDriver(cfg) === "localfs_key") for (const dir of Object.values(KEY_DIRS)) {
        try {
          const w = watch(path.join(minionPkiDir(cfg), dir), () => this.markKeysDirty(dir));
          w.on("error", () => undefined);
          this.watchers.push(w);
        } catch {
          // no such directory yet: the full rescan covers it
        }
      }
      this.timer = setInterval(() => void this.tick(), keysTickMs);
      this.timer.unref();
    }
  }

  private readonly now: () => number;
  /** test hook: after this many items installed, the heap is filled to the thread's bound (the host's restart is what is tested) */
  private readonly oomAfterItems: number | undefined;
  private installedItems = 0;

  private markKeysDirty(dir: string): void {
    this.dirty.add(dir === "minions_denied" ? "denied_keys" : "keys");
  }

  source(ch: Channel): Source {
    if (this.closed) throw new Error("the state-sync thread is stopping");
    let s = this.sources.get(ch);
    if (!s) {
      if (ch.startsWith("bank:")) {
        const bank = ch.slice(5);
        const db = { "jobs/loads": this.store.loads, "jobs/minions": this.store.minions, "jobs/endtimes": this.store.endtimes, "jobs/nocache": this.store.nocache, "jobs/returns": this.store.returns }[bank]!;
        s = new BankSource(ch, db as never);
      } else {
        // an earlier version kept the manifest in a CBOR file here: imported once
        const legacy = path.join(this.cfg.cachedir, STATUS_DIR, this.nodeId, `manifest-${ch}.cbor`);
        this.manifests ??= openManifests(this.cfg);
        const db = manifestDb(this.manifests, ch);
        if ((ch === "keys" || ch === "denied_keys") && keyCacheDriver(this.cfg) === "mmap_key") s = new IndexedKeySource(ch, keyStoreFor(this.cfg), db, legacy, this.now);
        else {
          const l = dirLayout(this.cfg, ch);
          s = new DirSource(ch, l.roots, l.target, db, legacy, this.now, scratchDb(this.manifests));
        }
      }
      this.sources.set(ch, s);
    }
    return s;
  }

  // ------------------------------------------------------------------ the main thread's port

  private onMain(m: ToEngine): void {
    switch (m.k) {
      case "peers":
        this.up = new Set(m.up);
        this.known = m.known.filter((p) => p !== this.nodeId);
        return;
      case "up":
        this.up.add(m.peer);
        for (const ch of KEY_CHANNELS) this.schedule(m.peer, ch);
        return;
      case "in":
        this.onPeer(m.from, m.p).then(
          (p) => m.req && this.post({ k: "res", id: m.id, v: p ?? new Uint8Array(0) }),
          (e: unknown) => m.req && this.post({ k: "err", id: m.id, ...portError(e, "STATE_SYNC_FAILED") }),
        );
        return;
      case "res":
      case "err": {
        const w = this.waiting.get(m.id);
        this.waiting.delete(m.id);
        if (m.k === "res") w?.resolve(m.p);
        else w?.reject(revivePortError(m, "STATE_SYNC_FAILED"));
        return;
      }
      case "call":
        this.call(m.call).then(
          (v) => this.post({ k: "res", id: m.id, v }),
          (e: unknown) => this.post({ k: "err", id: m.id, ...portError(e, "STATE_SYNC_FAILED") }),
        );
        return;
    }
  }

  /** Posts `m` to the main thread; its bytes (an encoder's view) in a buffer of their own, transferred (cbor.ts ownBytes). */
  private post(m: FromEngine): void {
    if (this.closed) return;
    if (m.k === "req" || m.k === "send") {
      const p = ownBytes(m.p);
      this.port.postMessage({ ...m, p }, [p.buffer]);
    } else if (m.k === "res" && m.v instanceof Uint8Array) {
      const v = ownBytes(m.v);
      this.port.postMessage({ ...m, v }, [v.buffer]);
    } else this.port.postMessage(m);
  }

  /** A request to `peer`; manifest and fetch requests say this engine reads deflated replies (`z: 1`, wire.ts). */
  private ask(peer: string, msg: PeerMsg, ms = requestTimeoutMs): Promise<unknown> {
    const id = this.nextId++;
    const out = msg.op === "manifest" || msg.op === "get" ? { ...msg, z: 1 } : msg;
    return new Promise<Uint8Array>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.post({ k: "req", id, to: peer, p: cbor.encode(out) as Uint8Array, ms });
    }).then(unpackReply);
  }

  // ------------------------------------------------------------------ calls (runners, the join)

  async call(c: EngineCall): Promise<unknown> {
    const channels = parseChannels(c.channels);
    if (c.op === "syncFrom") return this.syncFrom(c.peer, channels);
    const run = c.op === "sync_roots" ? (p: string) => this.askPull(p, channels) : (p: string) => this.syncFrom(p, channels);
    const peers = [...new Set(this.known)].sort();
    const all = Promise.all(peers.map(async (p): Promise<[string, PeerReport]> => {
      const t0 = this.now();
      if (!this.up.has(p)) return [p, { ...emptyReport(), errors: ["not connected"], failed: channels }];
      try {
        return [p, await run(p)];
      } catch (e) {
        return [p, { ...emptyReport(), errors: [`did not answer: ${(e as Error).message}`], ms: this.now() - t0, failed: channels }];
      }
    })).then((rs) => Object.fromEntries(rs));
    if (c.async) {
      void all.then((r) => log.info(`state-sync ${c.op} (${channels.join(", ")}) finished: ${JSON.stringify(r)}`));
      return { peers };
    }
    return all;
  }

  /** Asks `peer` to pull `channels` from this master; its report of what it did. */
  private async askPull(peer: string, channels: Channel[]): Promise<PeerReport> {
    const r = (await this.ask(peer, { op: "pull", channels }, pullTimeoutMs)) as Partial<PeerReport>;
    const num = (x: unknown) => (typeof x === "number" && Number.isFinite(x) ? x : 0);
    const out: PeerReport = { items: num(r?.items), bytes: num(r?.bytes), deleted: num(r?.deleted), errors: Array.isArray(r?.errors) ? r.errors.filter((x): x is string => typeof x === "string").slice(0, reportErrorsMax + 1) : [], ms: num(r?.ms) };
    if (Array.isArray(r?.shared) && r.shared.length) out.shared = r.shared.filter((x): x is string => typeof x === "string");
    if (Array.isArray(r?.failed) && r.failed.length) out.failed = r.failed.filter((x): x is string => typeof x === "string");
    return out;
  }

  /** Pulls `channels` from `peer`, one after the other; the sum of what each did. */
  async syncFrom(peer: string, channels: readonly Channel[]): Promise<PeerReport> {
    const total = emptyReport();
    const t0 = this.now();
    for (const ch of channels) {
      const r = await this.exclusive(peer, ch, () => this.pullChannel(peer, ch));
      total.items += r.items;
      total.bytes += r.bytes;
      total.deleted += r.deleted;
      for (const e of r.errors) addError(total, `${ch}: ${e}`);
      if (r.shared) (total.shared ??= []).push(ch);
      if (r.failed) (total.failed ??= []).push(ch);
    }
    total.ms = this.now() - t0;
    return total;
  }

  private exclusive<T>(peer: string, ch: Channel, f: () => Promise<T>): Promise<T> {
    const key = `${peer}\0${ch}`;
    const prev = this.chains.get(key) ?? Promise.resolve();
    const run = prev.then(f, f);
    const tail = run.catch(() => undefined);
    this.chains.set(key, tail);
    void tail.then(() => {
      if (this.chains.get(key) === tail) this.chains.delete(key);
    });
    return run;
  }

  /** An automatic pull of a key channel (a peer came up, or announced a digest we have not pulled). */
  private schedule(peer: string, ch: Channel, digest?: string): void {
    const key = `${peer}\0${ch}`;
    if (this.queued.has(key) || this.closed) return;
    this.queued.add(key);
    void this.exclusive(peer, ch, async () => {
      this.queued.delete(key);
      if (!this.up.has(peer)) return;
      const r = await this.pullChannel(peer, ch);
      if (digest !== undefined && r.errors.length === 0) this.pulledDigest.set(key, digest);
      if (r.errors.length === 0) this.status.markBehind(ch, peer, false);
    }).catch((e: Error) => log.warning(`state-sync ${ch} from ${peer} failed: ${e.message}`));
  }

  // ------------------------------------------------------------------ one channel from one peer

  private async pullChannel(peer: string, ch: Channel): Promise<PeerReport> {
    const r = emptyReport();
    const t0 = this.now();
    const src = this.source(ch);
    // what a page leaves to fetch, its buffers reused from page to page (entry-list.ts)
    const list = new EntryList();
    this.pulling.set(ch, (this.pulling.get(ch) ?? 0) + 1);
    try {
      await src.scan();
      // the first page is skipped by a peer whose live content has our digest (nothing to fetch or delete); a
      // peer with many items may answer with a range summary instead (`r: 1`: we read one), and only the ranges
      // whose content differs here are paged
      const digest = src.digest();
      const first = (await this.ask(peer, { op: "manifest", ch, n: pullPageItems, ...(digest ? { digest } : {}), w: wireForm, ...(src.entries ? { r: 1, t: 1 } : {}) })) as ManifestReply;
      if (!first || (!Array.isArray(first.entries) && !Array.isArray(first.sum))) throw new Error("malformed manifest page");
      if (typeof first.probe === "string" && this.sharedWith(peer, ch, first.probe)) r.shared = [ch];
      else if (first.same === true && digest) {
        // nothing differs
      } else if (Array.isArray(first.sum) && src.entries) {
        // down the tree of summaries (range-tree.ts): only the stretches that differ are summarised again, then paged
        const walk = new SummaryWalk((s) => src.entries!(s));
        walk.add(summaryFromWire(first.sum), 0);
        for (let s = walk.next(); s; s = walk.next()) {
          if (s.k === "page") await this.pullPages(peer, ch, src, r, list, { from: s.from, ...(s.to !== undefined ? { to: s.to } : {}) });
          else walk.add(summaryFromWire(((await this.ask(peer, subRequest(ch, s))) as ManifestReply | undefined)?.sum), s.depth, s);
        }
      } else await this.pullPages(peer, ch, src, r, list, {}, first);
    } catch (e) {
      addError(r, (e as Error).message);
      r.failed = [ch];
    } finally {
      // the directory changed under the pull (its installs, and anything an operator did meanwhile): one rescan now
      const n = this.pulling.get(ch)! - 1;
      if (n > 0) this.pulling.set(ch, n);
      else {
        this.pulling.delete(ch);
        if ((KEY_CHANNELS as readonly string[]).includes(ch)) this.dirty.add(ch);
      }
    }
    r.ms = this.now() - t0;
    if (r.items || r.deleted || r.errors.length) {
      const errs = r.errors.length ? `; ${r.errors.length} error(s), first: ${r.errors[0]}` : "";
      (r.errors.length ? log.warning : log.info).call(log, `state-sync ${ch} from ${peer}: installed ${r.items} items (${r.bytes} bytes), deleted ${r.deleted}${errs}`);
    }
    // a channel found shared is reported too (cluster.health shows the pull happened and why nothing moved)
    this.status.record(ch, peer, r);
    return r;
  }

  /**
   * Pages of the peer's manifest (all of it, or the range `[from, to)`), each diffed and applied; `first` is the first
   * page when already asked. Once a page is diffed only `list` (entry-list.ts: what it leaves to fetch, as bytes) lives
   * on while its items are fetched: the page's decoded entries are dropped first.
   */
  private async pullPages(peer: string, ch: Channel, src: Source, r: PeerReport, list: EntryList, range: { from?: string; to?: string }, first?: ManifestReply): Promise<void> {
    let page = first;
    let after: string | undefined;
    for (;;) {
      page ??= (await this.ask(peer, { op: "manifest", ch, ...(after !== undefined ? { after } : {}), ...range, n: pullPageItems, w: wireForm })) as ManifestReply;
      const { more, last, compact } = await this.takePage(peer, ch, src, page, r, list);
      page = undefined;
      await this.fetchList(peer, ch, src, list, r, compact);
      if (!more || last === undefined) return;
      after = last;
    }
  }

  /**
   * One page of the peer's manifest: checked entry by entry, diffed, tombstoned items removed, what is to be fetched
   * loaded into `list`; whether more pages follow, after which path, and whether the peer speaks the compact forms.
   */
  private async takePage(peer: string, ch: Channel, src: Source, page: ManifestReply, r: PeerReport, list: EntryList): Promise<{ more: boolean; last: string | undefined; compact: boolean }> {
    if (!page || !Array.isArray(page.entries)) throw new Error("malformed manifest page");
    const last = (page.entries as { p?: unknown }[]).at(-1)?.p;
    const good: ManifestEntry[] = [];
    for (const raw of page.entries) {
      const e = entryFromWire(raw);
      const p = (e as { p?: unknown })?.p;
      const why = !validEntry(e) ? "malformed entry" : (() => {
        const c = checkItemPath(ch, p);
        return "error" in c ? c.error : undefined;
      })();
      if (why) {
        refusals.line(`state-sync ${ch} from ${peer}: refused ${JSON.stringify(typeof p === "string" ? p.slice(0, 300) : p)}: ${why}`);
        addError(r, `refused ${JSON.stringify(typeof p === "string" ? p.slice(0, 300) : p)}: ${why}`);
        continue;
      }
      good.push(e as ManifestEntry);
    }
    const d = diffPage(policyOf(ch), good, (p) => src.entry(p));
    list.load(d.fetch);
    for (const e of d.delete) {
      try {
        await src.remove(e);
        r.deleted++;
      } catch (err) {
        addError(r, `${e.p}: ${(err as Error).message}`);
      }
    }
    for (const e of d.adopt) src.adopt(e);
    // a peer of an earlier version answers without `w`: its fetches take ranges only
    return { more: page.more === true, last: typeof last === "string" ? last : undefined, compact: page.w === wireForm };
  }

  /**
   * Fetches and installs the items of `list`: small ones batched, large ones by ranges; requestsInFlightMax requests in
   * flight. A batch is a stretch of the list's indices (its large items passed over): its entries are made from the list
   * when its request is written and again when its reply is checked, so no entry waits for a reply (entry-list.ts).
   */
  private async fetchList(peer: string, ch: Channel, src: Source, list: EntryList, r: PeerReport, compact: boolean): Promise<void> {
    const large: number[] = [];
    const retry: number[] = [];
    let next = 0;
    const small = (i: number) => list.size(i) <= chunkBytesMax;
    // the next batch, [from, to) over the list: at most fetchBatchItems small items and chunkBytesMax of their bytes
    const take = (): [number, number] | undefined => {
      const from = next;
      let count = 0;
      let bytes = 0;
      for (; next < list.length; next++) {
        if (!small(next)) {
          large.push(next);
          continue;
        }
        const s = list.size(next);
        if (count && (count >= fetchBatchItems || bytes + s > chunkBytesMax)) break;
        count++;
        bytes += s;
      }
      return count ? [from, next] : undefined;
    };
    const worker = async () => {
      for (let b = take(); b; b = take()) {
        const [from, to] = b;
        let pieces: Piece[];
        try {
          pieces = await this.fetchBatch(peer, ch, list, from, to, compact);
        } catch (e) {
          for (let i = from; i < to; i++) if (small(i)) addError(r, `${list.path(i)}: ${(e as Error).message}`);
          r.failed = [ch];
          continue;
        }
        const good: ManifestEntry[] = [];
        const data: Uint8Array[] = [];
        let k = 0;
        for (let i = from; i < to; i++) {
          if (!small(i)) continue;
          const e = list.at(i);
          // the reply's pieces are in the request's order (a whole piece names no path; one that does must be this one)
          const at = pieces[k++];
          const piece = at && (at.p === undefined || at.p === e.p) ? at : undefined;
          if (!piece || piece.error !== undefined || !(piece.data instanceof Uint8Array)) {
            addError(r, `${e.p}: ${piece?.error ?? "missing from the reply"}`);
            continue;
          }
          if (piece.data.byteLength !== e.s || sha256(piece.data) !== e.h) {
            retry.push(i); // fetched again alone, by ranges
            continue;
          }
          good.push(e);
          data.push(piece.data);
        }
        await this.installFetched(ch, src, good, data, r);
      }
    };
    await Promise.all(Array.from({ length: requestsInFlightMax }, worker));
    for (const i of [...retry, ...large]) {
      const e = list.at(i);
      await this.installOne(ch, src, e, (off, len) => this.fetchRange(peer, ch, e, off, len), r);
    }
  }

  /** The pieces of one batch, `[from, to)` over `list` (its small items), asked by path (a peer of an earlier version: by range). */
  private async fetchBatch(peer: string, ch: Channel, list: EntryList, from: number, to: number, compact: boolean): Promise<Piece[]> {
    const items: PeerMsg & { op: "get" } = { op: "get", ch, items: [] };
    for (let i = from; i < to; i++) {
      if (list.size(i) > chunkBytesMax) continue;
      items.items.push(compact ? list.path(i) : { p: list.path(i), h: list.at(i).h, off: 0, len: list.size(i) });
    }
    const rep = (await this.ask(peer, items)) as { pieces?: unknown };
    if (!rep || !Array.isArray(rep.pieces)) throw new Error("malformed fetch reply");
    return rep.pieces as Piece[];
  }

  /**
   * One fetched batch of whole items: a directory channel installs them with synchronous calls and records them in one
   * LMDB commit (Source.installBatch); what it leaves to the single path, and every item of the other sources, one by one.
   */
  private async installFetched(ch: Channel, src: Source, items: ManifestEntry[], data: Uint8Array[], r: PeerReport): Promise<void> {
    let out: (Error | "later" | undefined)[] | undefined;
    if (src.installBatch && items.length) {
      try {
        out = src.installBatch(items, data, () => this.installed());
      } catch (err) {
        // the thread stops (SourceStopped): what was renamed and not recorded is found by the next scan
        for (const e of items) addError(r, `${e.p}: ${(err as Error).message}`);
        return;
      }
    }
    for (let i = 0; i < items.length; i++) {
      const e = items[i]!;
      const how = out?.[i] ?? (out ? undefined : "later");
      if (how === undefined) {
        r.bytes += data[i]!.byteLength;
        r.items++;
      } else if (how === "later") {
        const d = data[i]!;
        await this.installOne(ch, src, e, async (off, len) => d.subarray(off, off + len), r);
      } else {
        addError(r, `${e.p}: ${how.message}`);
        log.debug(`state-sync ${ch}: ${e.p} not installed: ${how.message}`);
      }
    }
  }

  /** Counts an item in place (the test hook fills the heap after oomAfterItems: the host's restart is what is tested). */
  private installed(): void {
    if (this.oomAfterItems !== undefined && ++this.installedItems >= this.oomAfterItems) fillHeap();
  }

  private async installOne(ch: Channel, src: Source, e: ManifestEntry, fetch: (off: number, len: number) => Promise<Uint8Array>, r: PeerReport): Promise<void> {
    try {
      // not `r.bytes += await …`: that reads r.bytes before the await, and the other requests in flight add meanwhile
      const n = await src.install(e, fetch, chunkBytesMax, requestsInFlightMax);
      r.bytes += n;
      r.items++;
      this.installed();
    } catch (err) {
      addError(r, `${e.p}: ${(err as Error).message}`);
      if (err instanceof TransferError) r.failed = [ch];
      log.debug(`state-sync ${ch}: ${e.p} not installed: ${(err as Error).message}`);
    }
  }

  /** One range of a large item, its hash checked; fetched again up to rangeAttemptsMax times in all. */
  private async fetchRange(peer: string, ch: Channel, e: ManifestEntry, off: number, len: number): Promise<Uint8Array> {
    for (let attempt = 1; ; attempt++) {
      let rep: { pieces?: Piece[] };
      try {
        rep = (await this.ask(peer, { op: "get", ch, items: [{ p: e.p, h: e.h, off, len }] })) as typeof rep;
      } catch (err) {
        throw new TransferError((err as Error).message);
      }
      const piece = Array.isArray(rep?.pieces) ? rep.pieces[0] : undefined;
      if (!piece || piece.error !== undefined) throw new Error(piece?.error ?? "malformed fetch reply");
      if (piece.data instanceof Uint8Array && piece.data.byteLength === len && piece.ph === sha256(piece.data)) return piece.data;
      log.warning(`state-sync ${ch} from ${peer}: ${e.p} bytes ${off}+${len} arrived damaged (attempt ${attempt} of ${rangeAttemptsMax})`);
      if (attempt >= rangeAttemptsMax) throw new Error(`bytes ${off}+${len} arrived damaged ${rangeAttemptsMax} times`);
    }
  }

  // ------------------------------------------------------------------ serving peers

  private async onPeer(from: string, payload: Uint8Array): Promise<Uint8Array | undefined> {
    const m = cbor.decode(payload) as PeerMsg;
    if (!m || typeof m !== "object") throw new Error("malformed state-sync request");
    if (m.op === "changed") {
      const ch = parseChannel(m.ch);
      if (!ch || typeof m.digest !== "string") return undefined;
      if (this.pulledDigest.get(`${from}\0${ch}`) !== m.digest && this.localDigest(ch) !== m.digest) {
        this.status.markBehind(ch, from, true);
        this.schedule(from, ch, m.digest);
      }
      return undefined;
    }
    if (m.op === "pull") {
      if (!Array.isArray(m.channels)) throw new Error("malformed pull request");
      return cbor.encode(await this.syncFrom(from, parseChannels(m.channels))) as Uint8Array;
    }
    const ch = parseChannel(m.ch);
    if (!ch) throw new Error(`unknown state-sync channel ${JSON.stringify(m.ch)}`);
    const src = this.source(ch);
    // the asker reads deflated replies (a puller of an earlier version does not say so: plain CBOR)
    const z = m.z === 1;
    if (m.op === "manifest") {
      const first = m.after === undefined && typeof m.from !== "string";
      if (first) await src.scan();
      const probe = first && (ch === "keys" || ch === "denied_keys") ? this.writeProbe(from, ch) : undefined;
      return serveManifest(src, m, probe, z);
    }
    if (m.op === "get") return serveGet(src, ch, m, z);
    throw new Error(`unknown state-sync operation ${JSON.stringify((m as { op?: unknown }).op)}`);
  }

  private localDigest(ch: Channel): string | undefined {
    return this.sources.get(ch)?.digest();
  }

  /**
   * A fresh token beside this master's keys, in a file of its own per (puller, channel) (two pulls at once must not
   * overwrite each other's token; one pair's pulls never overlap): a puller that reads the same token in its own
   * directory shares it.
   */
  private writeProbe(puller: string, ch: Channel): string {
    if (!validId(puller)) return ""; // not a file name: no probe (keys travel, harmlessly identical if shared)
    const token = randomBytes(16).toString("hex");
    const file = path.join(minionPkiDir(this.cfg), probeName(this.nodeId, puller, ch));
    try {
      const tmp = `${file}.${token.slice(0, 8)}.tmp`;
      writeFileSync(tmp, token, { mode: 0o600 });
      renameSync(tmp, file);
      return token;
    } catch {
      return ""; // cannot write: treated as not shared (every key still travels, harmlessly identical)
    }
  }

  private sharedWith(peer: string, ch: Channel, token: string): boolean {
    if (!token || !validId(peer)) return false;
    try {
      const shared = readFileSync(path.join(minionPkiDir(this.cfg), probeName(peer, this.nodeId, ch)), "utf8") === token;
      if (shared) log.debug(`state-sync: keys are not pulled from ${peer}: both masters see the same key directory`);
      return shared;
    } catch {
      return false;
    }
  }

  // ------------------------------------------------------------------ the key channels' timer

  private async tick(): Promise<void> {
    if (this.ticking || this.closed) return;
    this.ticking = true;
    try {
      const now = this.now();
      const full = now - this.lastFullScan >= keysRescanMs;
      if (full) this.lastFullScan = now;
      for (const ch of KEY_CHANNELS) {
        // a pull is installing here: what the watcher saw stays owed (the pull's end marks the channel dirty), and the
        // digest is not announced half-way (rescanning a growing directory every tick was much of a 100k-key pull)
        if (this.pulling.has(ch)) {
          if (full) this.dirty.add(ch);
          continue;
        }
        const src = this.source(ch);
        if (full || this.dirty.has(ch) || src.cheapScan) {
          this.dirty.delete(ch);
          await src.scan();
        }
        const digest = src.digest();
        const last = this.announced.get(ch);
        if (last && last.digest === digest && now - last.at < announceMs) continue;
        this.announced.set(ch, { digest, at: now });
        const note = cbor.encode({ op: "changed", ch, digest } satisfies PeerMsg) as Uint8Array;
        for (const p of this.up) this.post({ k: "send", to: p, p: note });
      }
    } catch (e) {
      if (!(e instanceof SourceStopped)) log.warning(`state-sync: scanning the key directories failed: ${(e as Error).message}`);
    } finally {
      this.ticking = false;
    }
  }

  /**
   * Stops the timer, the watchers and the transfers, waits for a running scan to stop at its next manifest write, and
   * closes the manifests: once this resolves no LMDB transaction of the manifests runs or starts, so the thread can end
   * (worker.ts exits by itself after this: a terminate landing inside a transaction's callback aborts the process).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    for (const w of this.watchers) w.close();
    for (const w of this.waiting.values()) w.reject(new Error("the state-sync thread is stopping"));
    this.waiting.clear();
    await Promise.all([...this.sources.values()].map((s) => s.stop()));
    await this.manifests?.close();
  }
}
