/**
 * The local client behind `salt` and the runners (Salt's LocalClient): publishes over the master's
 * request port in clear with the root key, exactly as Salt's CLI does, and waits for returns on the
 * local event bus (subscribed before publishing, so no return can be missed). A bus connection the master
 * drops (a reader too slow in a flood: `pub_server_write_queue_size`) is made again, and the returns that went by
 * meanwhile are read from the job cache (job-returns.ts).
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { validId } from "../../shared/protocol/ids.js";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { decodeWire, encodeWire, isMap } from "../../shared/protocol/msgpack.js";
import { publishLoad, type PublishFields } from "./publish-load.js";
import { rootKeyPath } from "../pki/root-key.js";
import { expandNodegroup } from "../targeting/index.js";
import { EventClient } from "./event-client.js";
import { controlCall } from "./control-client.js";
import { jobReturns } from "./job-returns.js";
import { getLogger } from "../../shared/log.js";
import { BrineError } from "../../shared/errors.js";
import { ZmqSettle } from "../../shared/zmq-settle.js";

const log = getLogger("brine.client");

/** Tries to reconnect to the event bus after it dropped this client, and the pause between them, count / ms. */
export const busReconnectTriesMax = 50;
export const busReconnectPauseMs = 100;

export interface PubOptions extends Omit<PublishFields, "tgt_type"> {
  tgtType?: string;
  timeoutS?: number;
  user?: string;
}

export interface PubReply {
  jid?: string | null;
  minions?: string[];
  missing?: string[];
  error?: unknown;
}

/**
 * `syndic`: a minion a syndic reported below it (a master of masters cannot tell by itself whether it is
 * connected); `notConnected`: its master (this one, or the lower master) did not see it connected when it
 * published the job.
 */
export type JobReturn = { id: string; data: Record<string, unknown> } | { id: string; missing: true; syndic?: string; notConnected?: true };

/**
 * The zeromq binding, loaded on the first request: a runner thread gets a LocalClient whether its runner
 * publishes or not, and loading the native binding costs 25-80 ms of every runner call on this project's box.
 */
const zmq = (): Promise<typeof import("zeromq")> => import("zeromq");

/**
 * The request sockets this thread's clients have open (one per request in flight), so that a thread about to be
 * ended can close them first (closeClientSockets): a thread ended while a zeromq.js socket waits for a reply
 * aborts the whole process ("terminate called after throwing an instance of 'Napi::Error'", zeromq.js#411).
 */
const openSockets = new Set<import("zeromq").Request>();
/** set by closeClientSockets: the thread is being ended, and opens no socket again */
let socketsClosed = false;
/**
 * Sockets closed before their reply came: their request (over 128 bytes, so not copied by zeromq.js) may still be
 * queued in libzmq, which hands it back to this thread's module when it drops it, after the close; the thread
 * must not end before that (clientSocketsSettled; src/shared/zmq-settle.ts). A socket that got its reply has
 * sent its request already, and is not followed.
 */
const closedUnanswered = new ZmqSettle();

/** A request socket to the master, counted in openSockets until closeSocket(). */
async function openRequest(timeoutMs: number): Promise<import("zeromq").Request> {
  if (socketsClosed) throw new BrineError("THREAD_GONE", "this thread is stopping and sends no more requests to the master");
  const { Request } = await zmq();
  const sock = new Request({ receiveTimeout: timeoutMs, sendTimeout: timeoutMs, linger: 0 });
  openSockets.add(sock);
  return sock;
}

function closeSocket(sock: import("zeromq").Request, answered: boolean): void {
  openSockets.delete(sock);
  if (sock.closed) return;
  if (!answered) closedUnanswered.watch(sock);
  sock.close();
}

/**
 * Closes every request socket this thread's clients have open (their requests fail) and refuses new ones:
 * the last step of a thread before its host ends it (src/runners/runner-thread.ts on `stop`). The count closed.
 * The thread then waits for clientSocketsSettled before it lets itself be ended.
 */
export function closeClientSockets(): number {
  socketsClosed = true;
  const n = openSockets.size;
  for (const sock of [...openSockets]) closeSocket(sock, false);
  return n;
}

/**
 * How long a thread about to end waits for libzmq to destroy its unanswered request sockets, ms: under what its
 * host gives it to answer `stopped` (2 s and more), and far over what libzmq takes (a few ms).
 */
export const clientSettleWaitMs = 1_000;

/**
 * Resolves once libzmq has destroyed every request socket this thread closed before its reply (or after
 * `waitMs`, with a warning): only then may the thread end. The count still not destroyed.
 */
export async function clientSocketsSettled(waitMs = clientSettleWaitMs): Promise<number> {
  const left = await closedUnanswered.settled(waitMs);
  if (left > 0) log.warning(`${left} request socket(s) to the master not yet released by libzmq after ${waitMs} ms; the thread ends anyway`);
  return left;
}

/** Request attempts for a publish, as Salt's CLI makes (each waits `timeout`). */
export const publishTries = 3;

export function clientAddress(cfg: MasterConfig): string {
  let host = cfg.interface;
  if (host === "0.0.0.0") host = "127.0.0.1";
  if (host === "::") host = "::1";
  return host.includes(":") ? `[${host}]` : host;
}

/** A syndic that sent returns to this master (Salt's syndic_dir, `cachedir/syndics/<id>`). */
export function isRegisteredSyndic(cfg: MasterConfig, id: string): boolean {
  return validId(id) && existsSync(path.join(cfg.cachedir, "syndics", id));
}

export class LocalClient {
  constructor(readonly cfg: MasterConfig) {}

  /** The master user's CLI key, or "" when this user cannot read it (then eauth or a token must speak). */
  rootKey(): string {
    try {
      return readFileSync(rootKeyPath(this.cfg.cachedir, this.cfg.user), "utf8").trim();
    } catch {
      return "";
    }
  }

  /** One clear request to the master's request port (mk_token, get_token, ...), its decoded reply. */
  async clearRequest(load: Record<string, unknown>, timeoutS = this.cfg.timeout): Promise<unknown> {
    const sock = await openRequest(timeoutS * 1000);
    let answered = false;
    try {
      sock.connect(`tcp://${clientAddress(this.cfg)}:${this.cfg.ret_port}`);
      await sock.send(encodeWire({ enc: "clear", load, version: 3 }));
      const [reply] = await sock.receive();
      answered = true;
      return decodeWire(reply!);
    } finally {
      closeSocket(sock, answered);
    }
  }

  /**
   * Nodegroups are resolved here, as Salt's LocalClient resolves them, so minions (which do not know
   * the master's nodegroups) receive a plain compound target.
   */
  resolveTarget(tgt: string | string[], tgtType: string): { tgt: string | string[]; tgtType: string } | { error: string } {
    const groups = this.cfg.nodegroups ?? {};
    if (tgtType === "nodegroup") {
      const words = expandNodegroup(String(tgt), groups);
      if (!words) return { error: `Node group ${String(tgt)} unavailable in ${this.cfg.conf_file}` };
      return { tgt: words.join(" "), tgtType: "compound" };
    }
    if (tgtType === "compound") {
      const words = typeof tgt === "string" ? tgt.split(/\s+/).filter(Boolean) : tgt;
      const out: string[] = [];
      for (const w of words) {
        const resolved = w.startsWith("N@") && w.length > 2 ? expandNodegroup(w.slice(2), groups) : null;
        if (resolved) out.push("(", ...resolved, ")");
        else out.push(w);
      }
      return { tgt: out.join(" "), tgtType };
    }
    return { tgt, tgtType };
  }

  /**
   * The minions a target matches, as the master's minion data cache says (Salt's gather_minions /
   * CkMinions.check_minions, greedy), asked through the control socket (the cache.grains runner).
   */
  async gatherMinions(tgt: string | string[], tgtType: string): Promise<string[]> {
    const t = this.resolveTarget(tgt, tgtType);
    if ("error" in t) return [];
    const r = await controlCall(this.cfg.sock_dir, { op: "run", fun: "cache.grains", arg: [t.tgt, t.tgtType], kwarg: {} });
    if (r.type !== "return" || !r.ret || typeof r.ret !== "object") return [];
    return Object.keys(r.ret as Record<string, unknown>).sort();
  }

  async pub(o: PubOptions): Promise<PubReply> {
    const t = this.resolveTarget(o.tgt, o.tgtType ?? "glob");
    if ("error" in t) return { jid: null, minions: [], error: t.error };
    const load = publishLoad({ tgt: t.tgt, fun: o.fun, arg: o.arg, tgt_type: t.tgtType, ret: o.ret, jid: o.jid, kwargs: o.kwargs }, this.rootKey(), o.user ?? this.cfg.user);
    // a master of masters passes the timeout down: each syndic gives its own minions one second less (Salt's `to`)
    if (this.cfg.order_masters) load.to = o.timeoutS ?? this.cfg.timeout;
    const body = encodeWire({ enc: "clear", load, version: 3 });
    const timeoutMs = (o.timeoutS ?? this.cfg.timeout) * 1000;
    let lastErr: Error | undefined;
    for (let i = 0; i < publishTries; i++) {
      const sock = await openRequest(timeoutMs);
      let answered = false;
      try {
        sock.connect(`tcp://${clientAddress(this.cfg)}:${this.cfg.ret_port}`);
        await sock.send(body);
        const [reply] = await sock.receive();
        answered = true;
        const v = decodeWire(reply!);
        if (isMap(v) && isMap(v.load)) return v.load as PubReply;
        // a refused publish is Salt's top-level {"error": {name, message}}
        if (isMap(v) && v.error !== undefined) return { error: v.error };
        return { error: isMap(v) ? v : String(v) };
      } catch (e) {
        lastErr = e as Error;
        if (socketsClosed) break; // the thread is stopping: no further attempt
      } finally {
        closeSocket(sock, answered);
      }
    }
    throw new Error(`Salt request timed out. The master is not responding (${lastErr?.message ?? "timeout"})`);
  }

  /**
   * Publish and yield each minion's return as it arrives; after the wait ends, every minion that did
   * not return is yielded once with `missing: true` (Salt's show_timeout behaviour).
   */
  async *cmdIter(o: PubOptions, opts: { gatherJobTimeoutS?: number; onPub?: (r: PubReply) => void } = {}): AsyncGenerator<JobReturn> {
    const gapListeners = new Set<() => void>();
    let closed = false;
    const events: EventClient = new EventClient(this.cfg.sock_dir, () => {
      if (closed) return;
      log.warning("the event bus dropped this client (too slow a reader); reconnecting, and reading the returns it missed from the job cache");
      void (async () => {
        for (let i = 0; i < busReconnectTriesMax && !closed; i++) {
          try {
            await events.connect();
            break;
          } catch {
            await new Promise((r) => setTimeout(r, busReconnectPauseMs));
          }
        }
        for (const g of gapListeners) g();
      })();
    });
    await events.connect();
    try {
      yield* jobReturns((fn) => events.on(fn), (p) => this.pub(p), o, {
        timeoutMs: (o.timeoutS ?? this.cfg.timeout) * 1000,
        gatherJobTimeoutMs: (opts.gatherJobTimeoutS ?? this.cfg.gather_job_timeout) * 1000,
        onPub: opts.onPub,
        syndicWaitMs: this.cfg.order_masters ? this.cfg.syndic_wait * 1000 : undefined,
        // a master of masters: its syndics match '*' as accepted keys but never run a job themselves
        notMinion: this.cfg.order_masters ? (id) => isRegisteredSyndic(this.cfg, id) : undefined,
        watchGaps: (fn) => {
          gapListeners.add(fn);
          return () => gapListeners.delete(fn);
        },
        recover: (jid, ids) => this.cachedReturns(jid, ids),
      });
    } finally {
      closed = true;
      events.close();
    }
  }

  /**
   * The returns of `ids` to job `jid` the master's job cache holds (the jobs.list_job runner: cluster-wide under
   * placement), as return events' data (`return`, and `retcode`, `success`, `out` when the minion sent them).
   */
  async cachedReturns(jid: string, ids: string[]): Promise<{ id: string; data: Record<string, unknown> }[]> {
    const r = await controlCall(this.cfg.sock_dir, { op: "run", fun: "jobs.list_job", arg: [jid], kwarg: {} });
    if (r.type !== "return" || !isMap(r.ret) || !isMap(r.ret.Result)) {
      if (r.type !== "return") log.warning(`job ${jid}: the job cache could not be read for missed returns: ${r.type === "error" ? String(r.message) : r.type}`);
      return [];
    }
    const result = r.ret.Result as Record<string, unknown>;
    const out: { id: string; data: Record<string, unknown> }[] = [];
    for (const id of ids) {
      const rec = result[id];
      if (isMap(rec) && "return" in rec) out.push({ id, data: { ...(rec as Record<string, unknown>), id, jid } });
    }
    if (out.length) log.info(`job ${jid}: ${out.length} of ${ids.length} missed returns read from the job cache`);
    return out;
  }
}
