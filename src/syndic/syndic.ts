/**
 * brine's salt-syndic (Salt's SyndicManager + Syndic, salt/minion.py): beside a lower master, it signs in to
 * one or more masters of masters as a minion would (its own key in `pki_dir`, the pinned master key in
 * `minion_master.pub`), takes every publish they send and publishes it on the lower master with the root key
 * (the same jid, the user's `auth_list`, `master_id`, `user`), and sends what the lower master's bus says back
 * up:
 * - every minion return (`salt/job/<jid>/ret/<id>`) goes into the durable forward queue (forward-queue.ts) and
 *   up in `_syndic_return` batches every `syndic_event_forward_timeout`, grouped per jid with the lower
 *   master's job load sent the first time a jid goes up (`syndic_jid_forward_cache_hwm` jids remembered); an
 *   entry leaves the queue only when a master of masters acknowledged it;
 * - with `syndic_mode: sync`, the lower master's other events (not those carrying a `retcode`) go up as one
 *   `_minion_event` batch with pretag `syndic/<id>` to every connected master (best effort, in memory,
 *   bounded) — among them `salt/job/<jid>/new`, from which a master of masters learns the minions below;
 *   `cluster` sends returns only, and none of a job whose `master_id` is the lower master's own.
 *
 * Where a return goes: to the master of masters named by its `master_id` (a `syndic_master` entry written the
 * same way), else to the one that sent the job here, else (or when that one is down) to another connected one,
 * in random order or in list order (`syndic_failover`). A job published directly on the lower master has no
 * master_id: it goes up to one master of masters, as in Salt.
 *
 * Publishes whose `master_id` is the lower master's own came from here and are not forwarded again.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { MasterConfig } from "../shared/config/defaults.js";
import { getLogger } from "../shared/log.js";
import { loadOrCreateKeyPair } from "../lib/pki/master-keys.js";
import { EventClient } from "../lib/client/event-client.js";
import { LocalClient } from "../lib/client/local-client.js";
import { validId, validJid } from "../shared/protocol/ids.js";
import type { BusEvent } from "../shared/event-frame.js";
import { MinionKeys } from "../lib/minion/keys.js";
import { TestMinion } from "../lib/minion/test-minion.js";
import type { PublishLoad } from "../lib/minion/functions.js";
import { ForwardQueue, type QueuedReturn } from "./forward-queue.js";
import type { SyndicOptions, UpstreamAddress } from "./options.js";

const log = getLogger("brine.syndic");

/** Most returns in one `_syndic_return`, and most events in one forwarded batch (brine's minionEventsPerBatchMax). */
export const returnsPerRequestMax = 1000;
export const eventsPerRequestMax = 1000;
/** Events waiting to go up (sync mode) before the oldest are dropped. */
export const rawEventsMax = 10_000;
/** How long a forwarding request to a master of masters may take before it counts as failed. */
export const upstreamRequestTimeoutMs = 10_000;

const JOB_NEW = /^salt\/job\/(\d{20})\/new$/;
const JOB_RET = /^salt\/job\/(\d{20}|req)\/ret\/(.+)$/;

interface Upstream {
  addr: UpstreamAddress;
  minion?: TestMinion;
  up: boolean;
  /** jids whose load went up to this master (oldest first) */
  sentLoads: Set<string>;
  /** when a forwarding request to it last failed (it is tried after the others for a while) */
  failedAt?: number;
}

/** How long a master of masters whose request failed is tried only after the others. */
export const upstreamBackoffMs = 5000;

export interface SyndicDeps {
  /** acceptance_wait_time between sign-in attempts, ms (Salt: 10 s) */
  acceptanceWaitMs?: number;
  /** how long the start waits between connection attempts to the lower master's bus, ms */
  busRetryMs?: number;
}

export class Syndic {
  private readonly ups: Upstream[];
  private queue: ForwardQueue | undefined;
  private bus: EventClient | undefined;
  private readonly local: LocalClient;
  private keys: MinionKeys | undefined;
  /** jid → the lower master's job load, from its `salt/job/<jid>/new` */
  private readonly jobLoads = new Map<string, Record<string, unknown>>();
  /** jid → the master of masters that sent the job */
  private readonly jobOrigin = new Map<string, string>();
  private rawEvents: { tag: string; data: unknown }[] = [];
  private rawDropped = 0;
  private timer: NodeJS.Timeout | undefined;
  /** the forwarding round in progress, awaited by stop() */
  private flushing: Promise<void> | undefined;
  private stopped = false;
  /** returns acknowledged by a master of masters since the start */
  forwarded = 0;

  constructor(
    readonly cfg: MasterConfig,
    readonly opts: SyndicOptions,
    private readonly deps: SyndicDeps = {},
  ) {
    this.ups = opts.upstreams.map((addr) => ({ addr, up: false, sentLoads: new Set() }));
    this.local = new LocalClient(cfg);
  }

  /** Upstreams signed in now, by syndic_master name. */
  connected(): string[] {
    return this.ups.filter((u) => u.up).map((u) => u.addr.name);
  }

  get queued(): number {
    return this.queue?.size ?? 0;
  }

  async start(): Promise<void> {
    const pair = loadOrCreateKeyPair(this.opts.pkiDir, "minion", this.cfg.keysize);
    if (pair.created) log.info(`Generated the syndic's key pair in ${this.opts.pkiDir}`);
    this.keys = MinionKeys.fromPrivatePem(pair.privatePem);
    this.queue = new ForwardQueue(this.opts.queueDir, this.opts.queueMax);
    if (this.queue.size) log.info(`${this.queue.size} return(s) from before the restart wait in the forward queue`);
    await this.connectBus();
    for (const u of this.ups) void this.connectUpstream(u);
    this.timer = setInterval(() => void this.flush(), this.opts.forwardEveryMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.bus?.close();
    await Promise.all(this.ups.map((u) => u.minion?.stop().catch(() => undefined)));
    await this.flushing;
    await this.queue?.close();
  }

  // ---- the lower master's bus ----

  private async connectBus(): Promise<void> {
    const retry = this.deps.busRetryMs ?? 1000;
    for (;;) {
      if (this.stopped) return;
      const bus = new EventClient(this.cfg.sock_dir, () => {
        if (this.stopped) return;
        log.warning("the lower master's event bus closed; reconnecting (returns meanwhile are not seen)");
        void this.connectBus();
      });
      try {
        await bus.connect();
        bus.on((e) => this.onEvent(e));
        this.bus = bus;
        return;
      } catch (e) {
        log.warning(`cannot reach the lower master's event bus in ${this.cfg.sock_dir}: ${(e as Error).message}; retrying`);
        await new Promise((r) => setTimeout(r, retry));
      }
    }
  }

  private onEvent(e: BusEvent): void {
    const data = e.data as Record<string, unknown>;
    const isMap = data !== null && typeof data === "object" && !Array.isArray(data) && !Buffer.isBuffer(data);
    const isNew = JOB_NEW.exec(e.tag);
    if (isNew && isMap) {
      this.remember(this.jobLoads, isNew[1]!, { ...data, Minions: Array.isArray(data.minions) ? data.minions : [] });
    }
    const ret = JOB_RET.exec(e.tag);
    if (ret && isMap && "return" in data && "jid" in data) {
      if (this.opts.mode === "cluster" && this.opts.masterId !== undefined && data.master_id === this.opts.masterId) return;
      const jid = String(data.jid);
      const id = typeof data.id === "string" ? data.id : ret[2]!;
      if (!validId(id) || !(validJid(jid) || jid === "req")) return;
      const r: Record<string, unknown> = {};
      for (const k of ["return", "retcode", "success", "fun_args", "out"]) if (k in data) r[k] = data[k];
      const q: QueuedReturn = { master: typeof data.master_id === "string" ? data.master_id : (this.jobOrigin.get(jid) ?? null), jid, id, fun: data.fun, ret: r };
      const load = this.jobLoads.get(jid);
      if (load) q.load = load;
      this.queue?.push(q).catch((err: Error) => log.error(`a return of ${id} for ${jid} could not be queued: ${err.message}`));
      return;
    }
    if (this.opts.mode !== "sync") return;
    if (isMap && "retcode" in data) return;
    this.rawEvents.push({ tag: e.tag, data: e.data });
    if (this.rawEvents.length > rawEventsMax) {
      this.rawDropped += this.rawEvents.length - rawEventsMax;
      this.rawEvents = this.rawEvents.slice(-rawEventsMax);
    }
  }

  private remember<V>(m: Map<string, V>, k: string, v: V): void {
    m.delete(k);
    m.set(k, v);
    const max = Math.max(this.opts.jidForwardCacheHwm, 1000);
    while (m.size > max) m.delete(m.keys().next().value!);
  }

  // ---- masters of masters ----

  private async connectUpstream(u: Upstream): Promise<void> {
    const pinned = path.join(this.opts.pkiDir, "minion_master.pub");
    const wait = this.deps.acceptanceWaitMs ?? 10_000;
    while (!this.stopped) {
      const m = new TestMinion({
        id: this.opts.id,
        master: u.addr.host,
        retPort: u.addr.port,
        keys: this.keys!,
        masterPub: existsSync(pinned) ? readFileSync(pinned, "utf8") : undefined,
        masterFinger: this.opts.finger,
        acceptanceWaitMs: wait,
        randomReauthDelayMs: 0,
        requestTimeoutMs: upstreamRequestTimeoutMs,
        requestTries: 2,
        takeEveryPublish: true,
        onPublish: (load) => this.forwardDown(u, load),
      });
      m.on("problem", ({ where, error }) => log.debug(`${u.addr.name}: ${where}: ${error.message}`));
      m.on("drop", ({ reason, detail }) => log.debug(`${u.addr.name}: a publish was dropped (${reason}${detail ? `: ${detail}` : ""})`));
      try {
        await m.start();
      } catch (e) {
        await m.stop().catch(() => undefined);
        if (this.stopped) return;
        log.error(`Error while bringing up syndic for multi-syndic. Is the master at ${u.addr.name} responding? (${(e as Error).message})`);
        await new Promise((r) => setTimeout(r, wait));
        continue;
      }
      if (this.stopped) return void (await m.stop());
      if (!existsSync(pinned) && m.signIn.masterPub) writeFileSync(pinned, m.signIn.masterPub, { mode: 0o644 });
      u.minion = m;
      u.up = true;
      log.info(`Syndic successfully connected to ${u.addr.name}`);
      m.fireEvent(`salt/syndic/${this.opts.id}/start`, `Syndic ${this.opts.id} started at ${new Date().toString()}`).catch(() => undefined);
      return;
    }
  }

  /** A publish from a master of masters, published again on the lower master (Salt's Syndic.syndic_cmd). */
  private async forwardDown(u: Upstream, load: PublishLoad): Promise<void> {
    if (this.opts.masterId !== undefined && load.master_id === this.opts.masterId) return; // one of ours, come back
    if (!validJid(load.jid)) return;
    this.remember(this.jobOrigin, load.jid, u.addr.name);
    log.debug(`forwarding job ${load.jid} (${String(load.fun)}) from ${u.addr.name} to the lower master`);
    const kwargs: Record<string, unknown> = { auth_list: Array.isArray(load.auth_list) ? load.auth_list : [] };
    if (load.master_id !== undefined) kwargs.master_id = load.master_id;
    if (load.user !== undefined) kwargs.user = load.user;
    if (typeof load.delimiter === "string") kwargs.delimiter = load.delimiter;
    try {
      const r = await this.local.pub({
        tgt: load.tgt as string | string[],
        fun: load.fun,
        arg: load.arg,
        tgtType: load.tgt_type ?? "glob",
        ret: typeof load.ret === "string" ? load.ret : "",
        jid: load.jid,
        kwargs,
        timeoutS: 10,
      });
      // no minion of the lower master matched: normal when the job is for another syndic's minions
      if (r.error && !(r.jid === null && Array.isArray(r.minions) && r.minions.length === 0)) log.warning(`Unable to forward pub data of ${load.jid} to the lower master: ${JSON.stringify(r.error)}`);
      else if (r.error) log.debug(`job ${load.jid}: no minion of the lower master matches ${JSON.stringify(load.tgt)}`);
    } catch (e) {
      log.warning(`Unable to forward pub data of ${load.jid}: ${(e as Error).message}`);
    }
  }

  /** The connected masters of masters in the order to try for a return naming `master`. */
  private targets(master: string | null): Upstream[] {
    const up = this.ups.filter((u) => u.up && u.minion?.running);
    const now = Date.now();
    const healthy = (u: Upstream) => u.failedAt === undefined || now - u.failedAt > upstreamBackoffMs;
    const shuffled = this.opts.failover === "random" ? shuffle(up) : up;
    const order = [...shuffled.filter(healthy), ...shuffled.filter((u) => !healthy(u))];
    const named = master === null ? undefined : order.find((u) => u.addr.name === master);
    return named ? [named, ...order.filter((u) => u !== named)] : order;
  }

  /** One forwarding round: events, then queued returns. Never two at once. */
  /** One forwarding round; a call while one runs does nothing (the next tick forwards what arrived since). */
  async flush(): Promise<void> {
    if (this.flushing || this.stopped) return;
    this.flushing = (async () => {
      try {
        await this.flushEvents();
        await this.flushReturns();
      } catch (e) {
        log.warning(`forwarding round failed: ${(e as Error).message}`);
      }
    })();
    try {
      await this.flushing;
    } finally {
      this.flushing = undefined;
    }
  }

  private async flushEvents(): Promise<void> {
    if (this.rawDropped) {
      log.warning(`${this.rawDropped} event(s) of the lower master were dropped before they could go up (more than ${rawEventsMax} waiting)`);
      this.rawDropped = 0;
    }
    const up = this.ups.filter((u) => u.up && u.minion?.running);
    if (!this.rawEvents.length || !up.length) return;
    const events = this.rawEvents;
    this.rawEvents = [];
    for (let i = 0; i < events.length; i += eventsPerRequestMax) {
      const chunk = events.slice(i, i + eventsPerRequestMax);
      await Promise.all(
        up.map((u) =>
          u.minion!.channel
            .send({ cmd: "_minion_event", id: this.opts.id, tok: this.keys!.tok, pretag: `syndic/${this.opts.id}`, events: chunk }, { timeoutMs: upstreamRequestTimeoutMs, tries: 1 })
            .catch((e: Error) => log.warning(`Unable to call _fire_master on ${u.addr.name}: ${e.message}`)),
        ),
      );
    }
  }

  private async flushReturns(): Promise<void> {
    const q = this.queue!;
    const failed = new Set<Upstream>();
    const tried = new Set<number>();
    while (!this.stopped && q.size > 0) {
      const entries = q.peek(returnsPerRequestMax, tried);
      if (!entries.length) return;
      // group by the first master to try
      const groups = new Map<Upstream, typeof entries>();
      for (const e of entries) {
        const t = this.targets(e.value.master).find((u) => !failed.has(u));
        if (!t) return; // nobody to send to this round: the queue keeps them
        let g = groups.get(t);
        if (!g) groups.set(t, (g = []));
        g.push(e);
      }
      for (const [u, g] of groups) {
        const ok = await this.sendUp(u, g.map((e) => e.value));
        if (ok) {
          await q.remove(g.map((e) => e.key));
          this.forwarded += g.length;
        } else {
          failed.add(u);
          for (const e of g) tried.add(e.key); // another master may take them later in this round
        }
      }
      // entries whose master failed wait for the next round, when the others come first (upstreamBackoffMs)
      if (tried.size) return;
    }
  }

  /** One `_syndic_return` of these returns, grouped per jid (Salt's _return_pub_multi). True when acknowledged. */
  private async sendUp(u: Upstream, rets: QueuedReturn[]): Promise<boolean> {
    const byJid = new Map<string, Record<string, unknown>>();
    for (const r of rets) {
      let b = byJid.get(r.jid);
      if (!b) {
        const load = r.load ?? {};
        const sendLoad = r.load !== undefined && !u.sentLoads.has(r.jid);
        b = { id: this.opts.id, jid: r.jid, fun: r.fun, arg: load.arg ?? null, tgt: load.tgt ?? null, tgt_type: load.tgt_type ?? null, load: sendLoad ? load : {}, return: {} };
        if (r.master !== null) b.master_id = r.master;
        byJid.set(r.jid, b);
      }
      (b.return as Record<string, unknown>)[r.id] = r.ret;
    }
    try {
      await u.minion!.channel.send({ cmd: "_syndic_return", id: this.opts.id, tok: this.keys!.tok, load: [...byJid.values()] }, { timeoutMs: upstreamRequestTimeoutMs, tries: 1 });
      u.failedAt = undefined;
    } catch (e) {
      log.warning(`Unable to call _return_pub_multi on ${u.addr.name}: ${(e as Error).message}; ${rets.length} return(s) stay queued`);
      u.failedAt = Date.now();
      return false;
    }
    for (const jid of byJid.keys()) {
      if (!rets.some((r) => r.jid === jid && r.load)) continue;
      u.sentLoads.add(jid);
      if (u.sentLoads.size > this.opts.jidForwardCacheHwm) u.sentLoads.delete(u.sentLoads.values().next().value!);
    }
    return true;
  }
}

function shuffle<T>(a: T[]): T[] {
  const b = [...a];
  for (let i = b.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [b[i], b[j]] = [b[j]!, b[i]!];
  }
  return b;
}
