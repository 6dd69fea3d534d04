/**
 * A protocol-exact Salt minion for tests and for brine-swarm: what a 3007 (v3) or 3006.8 (v2) minion sends
 * and expects, byte for byte, with synthetic execution functions.
 *
 * `start()` follows a minion's start on the wire (spec §5.5): `_auth` (retried as Salt's minion retries it, on a
 * channel of its own: signInLoop), SUB connect to the publish
 * port from the auth reply, `_pillar`, the two start events. It resolves when all of that is done and
 * rejects with a coded reason: MINION_AUTH_PENDING (still pending at the deadline), MINION_AUTH_REJECTED,
 * MINION_AUTH_FULL, MINION_AUTH_TIMEOUT (no reply), MINION_AUTH_INVALID / MINION_MASTER_KEY_CHANGED
 * (the reply did not verify, or only non-sign-in replies such as a busy master's `{"error": …}` came
 * back until the deadline; those are retried every acceptance_wait_time, as Salt's minion manager does),
 * MINION_STOPPED.
 *
 * Running, it answers matching publishes with `_return`, signs in again when a publish does not decrypt
 * (AES rotation, after a random delay up to `random_reauth_delay`) or when a request gets "bad load"
 * (then resends once), and sends `salt/minion/<id>/start` again when its SUB connection comes back. A request that
 * times out is tried again as Salt's request channel does (req-channel.ts): packaged anew with a new nonce, except
 * `_pillar`, whose tries send the same bytes.
 *
 * Every wait uses one coarse timer shared by all minions of the process.
 */
import { EventEmitter } from "node:events";
import type { KeyObject } from "node:crypto";
import type * as zmq from "zeromq";
import { BrineError, isBrineError } from "../../shared/errors.js";
import { Crypticle } from "../../shared/protocol/crypticle.js";
import { decodeWire, isMap, type WireValue } from "../../shared/protocol/msgpack.js";
import { DEFAULT_ENC_ALGO, DEFAULT_SIG_ALGO, publicKey, type EncAlgo, type SigAlgo } from "../../shared/protocol/rsa.js";
import { nowMs, sharedTimer, type CoarseTimer } from "../../shared/coarse-timer.js";
import { FunctionRunner, saltStamp, returnLoad, type CmdRunStandIn, type PublishLoad } from "./functions.js";
import { syntheticGrains } from "./grains.js";
import { MinionKeys, type KeyPair } from "./keys.js";
import { PubDecoder, PubSocket, type PubDrop } from "./pub-channel.js";
import { ReqChannel, type ChannelCrypto } from "./req-channel.js";
import { buildAuthRequest, handleAuthReply, newSignInState, type Creds, type Protocol, type SignInConfig, type SignInState } from "./sign-in.js";
import { isForMe } from "./target.js";
import { saltReopenPollMs, ZmqReqTransport, type RequestOptions } from "../zmq-req-client.js";
import { packSalt } from "./wire.js";

export interface TestMinionOptions {
  id: string;
  /** master host (IP or name) */
  master: string;
  retPort: number;
  /** use this publish port instead of the one in the auth reply */
  publishPort?: number;
  /** "v3" (3006.12+/3007.4+, default) or "v2" (3006.8: global AES key, no enc_algo/sig_algo) */
  protocol?: Protocol;
  keys: MinionKeys | KeyPair;
  grains?: Record<string, unknown>;
  /** connect from this loopback address (libzmq `tcp://SRC:0;DST:PORT`) so the master sees a distinct peer */
  sourceIp?: string;
  /** acceptance_wait_time (ms), 10000 in Salt */
  acceptanceWaitMs?: number;
  /** acceptance_wait_time_max (ms); 0/undefined = no doubling */
  acceptanceWaitMaxMs?: number;
  /** start() gives up (MINION_AUTH_PENDING / MINION_AUTH_TIMEOUT) after this long without acceptance; default 300000 */
  authDeadlineMs?: number;
  /** random_reauth_delay (ms), 10000 in Salt */
  randomReauthDelayMs?: number;
  /** encryption_algorithm, OAEP-SHA1 by default */
  encAlgo?: EncAlgo;
  /** signing_algorithm, PKCS1v15-SHA1 by default */
  sigAlgo?: SigAlgo;
  /** send enc_algo/sig_algo with the v2 protocol too (3006.9–3006.11) */
  sendAlgos?: boolean;
  /** sign_pub_messages: verify each publish's signature */
  signPubMessages?: boolean;
  /** a pinned master key (minion_master.pub) from an earlier run: the minion then sends `token` */
  masterPub?: string;
  /** master_finger */
  masterFinger?: string;
  /** rejected_retry: keep retrying when the key is rejected */
  rejectedRetry?: boolean;
  /** auth_timeout (ms) × auth_tries; 5000 × 7 in Salt */
  authTimeoutMs?: number;
  authTries?: number;
  /** request_channel_timeout (ms) × request_channel_tries; 60000 × 3 in Salt */
  requestTimeoutMs?: number;
  requestTries?: number;
  /** return_retry_timer/_max (ms): each return's timeout is random in [min, max]; 5000/10000 in Salt */
  returnTimeoutMinMs?: number;
  returnTimeoutMaxMs?: number;
  returnTries?: number;
  /** recon_default / recon_max (ms) for the SUB socket */
  reconDefaultMs?: number;
  reconMaxMs?: number;
  /** watch the SUB connection (wait for the handshake in start(), re-fire the start event on reconnect); default true */
  pubMonitor?: boolean;
  /** how long start() waits for the SUB handshake before carrying on without it (a "problem" event); default 30000 */
  pubConnectTimeoutMs?: number;
  /** minion_jid_queue_hwm, 100 in Salt */
  jidQueueHwm?: number;
  /** what test.version answers; default "3007.8" (v3) or "3006.8" (v2) */
  version?: string;
  cmdRun?: CmdRunStandIn;
  /** a syndic: every publish is taken, whatever its target (Salt's Syndic matches none) */
  takeEveryPublish?: boolean;
  /** when set, a taken publish goes here instead of being run and returned (a syndic forwards it) */
  onPublish?: (load: PublishLoad) => void | Promise<void>;
  context?: zmq.Context;
  timer?: CoarseTimer;
}

export type AuthResult = "accepted" | "pending" | "rejected" | "full" | "timeout" | "failed" | "error";

export interface MinionEvents {
  auth: [{ result: AuthResult; ms: number; attempt: number; reason: string; error?: Error }];
  ready: [{ ms: number; authMs: number }];
  publish: [{ load: PublishLoad; at: number; reauthed: boolean }];
  drop: [{ reason: PubDrop; detail?: string }];
  return: [{ jid: string; fun: unknown; ret: unknown; retcode: unknown; publishAt: number; ackAt: number }];
  returnFailed: [{ jid: string; fun: unknown; error: Error }];
  badLoad: [{ cmd: unknown }];
  reauth: [{ reason: string }];
  pubConnected: [{ first: boolean }];
  pubDisconnected: [];
  problem: [{ where: string; error: Error }];
  /** a request got no reply in time (the socket is reopened and the request sent again, up to its tries) */
  timeout: [{ what: string; attempt: number; tries: number }];
}

export interface MinionStats {
  authAttempts: number;
  reauths: number;
  badLoads: number;
  publishes: number;
  drops: number;
  returns: number;
  returnFailures: number;
  timeouts: number;
}

type State = "idle" | "starting" | "running" | "stopped";

export class TestMinion extends EventEmitter<MinionEvents> implements ChannelCrypto {
  readonly id: string;
  readonly protocol: Protocol;
  readonly keys: MinionKeys;
  readonly encAlgo: EncAlgo;
  readonly sigAlgo: SigAlgo;
  readonly sendAlgos: boolean;
  readonly grains: Record<string, unknown>;
  readonly signIn: SignInState;
  readonly runner: FunctionRunner;
  readonly stats: MinionStats = { authAttempts: 0, reauths: 0, badLoads: 0, publishes: 0, drops: 0, returns: 0, returnFailures: 0, timeouts: 0 };
  pillar: WireValue = {};
  /**
   * Hold the returns of the jobs it runs instead of sending them (a bench measures a publish apart from its
   * returns); `sendHeldReturns()` sends them later, each as it would have gone.
   */
  holdReturns = false;
  private readonly held: { load: PublishLoad; at: number; outcome: Awaited<ReturnType<FunctionRunner["run"]>> }[] = [];
  private creds_: Creds | undefined;
  private aesC: Crypticle | undefined;
  private sessionC: Crypticle | undefined;
  private transport: ZmqReqTransport | undefined;
  /** the channel of the sign-in in progress (each sign-in opens its own, as Salt's does) */
  private authChannel: ZmqReqTransport | undefined;
  private channel_: ReqChannel | undefined;
  private pub: PubSocket | undefined;
  private decoder: PubDecoder | undefined;
  private abort = new AbortController();
  private authInFlight: Promise<void> | undefined;
  private state: State = "idle";
  private readonly jidQueue: string[] = [];
  private readonly jidSet = new Set<string>();
  private readonly timer: CoarseTimer;
  private readonly cfg: SignInConfig;
  private readonly o: TestMinionOptions;

  constructor(opts: TestMinionOptions) {
    super();
    this.o = opts;
    this.id = opts.id;
    this.protocol = opts.protocol ?? "v3";
    this.keys = opts.keys instanceof MinionKeys ? opts.keys : new MinionKeys(opts.keys);
    this.encAlgo = opts.encAlgo ?? DEFAULT_ENC_ALGO;
    this.sigAlgo = opts.sigAlgo ?? DEFAULT_SIG_ALGO;
    this.sendAlgos = this.protocol === "v3" || !!opts.sendAlgos;
    this.timer = opts.timer ?? sharedTimer;
    const version = opts.version ?? (this.protocol === "v3" ? "3007.8" : "3006.8");
    this.grains = opts.grains ?? syntheticGrains(opts.id, { ip: opts.sourceIp, saltversion: version });
    this.signIn = newSignInState(opts.masterPub);
    this.cfg = {
      id: this.id,
      keys: this.keys,
      protocol: this.protocol,
      encAlgo: this.encAlgo,
      sigAlgo: this.sigAlgo,
      sendAlgos: this.sendAlgos,
      masterFinger: opts.masterFinger,
    };
    const self = this;
    this.runner = new FunctionRunner(
      {
        id: this.id,
        grains: this.grains,
        get pillar() {
          return self.pillar;
        },
        version,
      },
      { cmdRun: opts.cmdRun, timer: this.timer, signal: () => this.abort.signal, masterFile: (p, env) => this.masterFile(p, env) },
    );
  }

  // ---- ChannelCrypto / PubCrypto ----

  requestCrypticle(): Crypticle | undefined {
    return this.protocol === "v3" ? this.sessionC : this.aesC;
  }

  aesCrypticle(): Crypticle | undefined {
    return this.aesC;
  }

  masterPubKey(): KeyObject | undefined {
    return this.signIn.masterPub === undefined ? undefined : publicKey(this.signIn.masterPub);
  }

  reauth(reason: string): Promise<void> {
    this.stats.reauths++;
    this.emit("reauth", { reason });
    return this.authenticate(reason);
  }

  // ---- state ----

  get creds(): Creds | undefined {
    return this.creds_;
  }

  get running(): boolean {
    return this.state === "running";
  }

  /** The request channel (for tests that send their own AES requests). */
  get channel(): ReqChannel {
    if (!this.channel_) throw new BrineError("MINION_STOPPED", "not started");
    return this.channel_;
  }

  get requestOptions(): RequestOptions {
    return { timeoutMs: this.o.requestTimeoutMs ?? 60_000, tries: this.o.requestTries ?? 3 };
  }

  /** (a method, so the compiler does not narrow `state` across awaits) */
  private starting(): boolean {
    return this.state === "starting";
  }

  private isStopped(): boolean {
    return this.state === "stopped";
  }

  private stopped(): BrineError {
    return new BrineError("MINION_STOPPED", this.id);
  }

  // ---- lifecycle ----

  async start(): Promise<void> {
    if (this.state === "running" || this.state === "starting") throw new BrineError("MINION_STOPPED", `${this.id} is already ${this.state}`);
    this.state = "starting";
    this.abort = new AbortController();
    const t0 = nowMs();
    this.transport = this.newReqTransport();
    this.channel_ = new ReqChannel(this.transport, this, {
      onBadLoad: (cmd) => {
        this.stats.badLoads++;
        this.emit("badLoad", { cmd });
      },
    });
    this.decoder = new PubDecoder(this, {
      signPubMessages: this.o.signPubMessages,
      randomReauthDelayMs: this.o.randomReauthDelayMs ?? 10_000,
      timer: this.timer,
      signal: this.abort.signal,
    });
    try {
      await this.authenticate("start");
      const authMs = nowMs() - t0;
      if (!this.starting()) throw this.stopped();
      const port = this.o.publishPort ?? this.creds_!.publishPort;
      this.pub = new PubSocket(
        { host: this.o.master, port, sourceIp: this.o.sourceIp },
        {
          identity: this.id,
          context: this.o.context,
          reconDefaultMs: this.o.reconDefaultMs,
          reconMaxMs: this.o.reconMaxMs,
          monitor: this.o.pubMonitor ?? true,
          onFrame: (f) => void this.onFrame(f),
          onConnected: (first) => this.onPubConnected(first),
          onDisconnected: () => this.emit("pubDisconnected"),
        },
      );
      try {
        await this.pub.connect(this.o.pubConnectTimeoutMs ?? 30_000, this.timer);
      } catch (e) {
        // A Salt minion does not wait for its SUB connection at all; we wait (so a test's first publish is
        // not lost), and past the deadline carry on as Salt would, saying so: publishes may be missed.
        this.emit("problem", { where: "publish port", error: e as Error });
      }
      if (!this.starting()) throw this.stopped();
      this.pillar = await this.channel.sendPrivate(this.pillarLoad(), this.requestOptions);
      await this.fireStartEvents();
      if (!this.starting()) throw this.stopped();
      this.state = "running";
      this.emit("ready", { ms: nowMs() - t0, authMs });
    } catch (e) {
      const wasStopped = !this.starting();
      this.teardown();
      this.state = "stopped";
      throw wasStopped && !isBrineError(e) ? this.stopped() : e;
    }
  }

  /** Close the sockets and cancel every wait; a stopped minion can be started again (as a restart). */
  async stop(): Promise<void> {
    this.state = "stopped";
    this.teardown();
  }

  private teardown(): void {
    this.abort.abort(this.stopped());
    this.pub?.close();
    this.pub = undefined;
    this.transport?.close();
    this.transport = undefined;
    this.authChannel?.close();
    this.authChannel = undefined;
  }

  // ---- sign-in ----

  /** Sign in (one at a time; concurrent callers share the same attempt). */
  authenticate(reason: string): Promise<void> {
    if (!this.authInFlight) {
      this.authInFlight = this.signInLoop(reason).finally(() => {
        this.authInFlight = undefined;
      });
    }
    return this.authInFlight;
  }

  /**
   * Salt's sign-in (salt/crypt.py `AsyncAuth._authenticate`, `sign_in`; salt/minion.py `MinionManager._connect_minion`),
   * the same in 3006.8 and 3007.x:
   * - each sign-in opens a clear request channel of its own (a new connection) and closes it when it ends;
   * - one payload (one nonce) is sent up to `auth_tries` times, `auth_timeout` each (the transport's tries: 3007.x
   *   reopens the connection for each, 3006.8 queues them on the one it has, zmq-req-client.ts);
   * - "pending" (or rejected with `rejected_retry`): a new payload on the same channel after `acceptance_wait_time`,
   *   which doubles after each wait while below `acceptance_wait_time_max`;
   * - every try timed out (`auth_safemode` False, Salt's default), or a reply that is not a sign-in reply (a busy
   *   master's `{"error": …}`): the channel is closed and the minion manager starts a new sign-in after its
   *   `auth_wait`, `acceptance_wait_time` grown by `acceptance_wait_time` at each failure while below the max.
   * Salt retries forever; this minion gives up at `authDeadlineMs` (a swarm must end).
   */
  private async signInLoop(reason: string): Promise<void> {
    const started = nowMs();
    const deadline = started + (this.o.authDeadlineMs ?? 300_000);
    const base = this.o.acceptanceWaitMs ?? 10_000;
    const max = this.o.acceptanceWaitMaxMs ?? 0;
    let pendingWait = base;
    let failWait = base;
    const signal = this.abort.signal;
    let channel: ZmqReqTransport | undefined;
    try {
      for (let attempt = 1; ; attempt++) {
        if (!this.transport || signal.aborted) throw this.stopped();
        channel ??= this.authChannel = this.newReqTransport();
        this.stats.authAttempts++;
        const req = buildAuthRequest(this.cfg, this.signIn);
        let result: AuthResult;
        let failure: string | undefined;
        try {
          const raw = await channel.request(packSalt(req.envelope), {
            timeoutMs: this.o.authTimeoutMs ?? 5_000,
            tries: this.o.authTries ?? 7,
            label: "_auth",
          });
          let reply: WireValue;
          try {
            reply = decodeWire(raw);
          } catch (e) {
            throw new BrineError("MINION_AUTH_INVALID", `reply does not decode: ${(e as Error).message}`);
          }
          const outcome = handleAuthReply(this.cfg, this.signIn, req, reply);
          result = outcome.result;
          if (outcome.result === "accepted") {
            this.setCreds(outcome.creds);
            this.emit("auth", { result, ms: nowMs() - started, attempt, reason });
            return;
          }
          if (outcome.result === "failed") failure = outcome.detail;
        } catch (e) {
          if (signal.aborted || isBrineError(e, "MINION_STOPPED")) throw this.stopped();
          if (isBrineError(e, "MINION_REQ_TIMEOUT")) {
            result = "timeout";
          } else {
            this.emit("auth", { result: "error", ms: nowMs() - started, attempt, reason, error: e as Error });
            throw e;
          }
        }
        this.emit("auth", { result, ms: nowMs() - started, attempt, reason, error: failure === undefined ? undefined : new Error(failure) });
        if (result === "full") throw new BrineError("MINION_AUTH_FULL", this.id);
        if (result === "rejected" && !this.o.rejectedRetry) throw new BrineError("MINION_AUTH_REJECTED", this.id);
        const failed = result === "timeout" || result === "failed";
        if (failed) {
          // the sign-in failed: its channel goes, and the next one starts after the manager's wait
          channel.close();
          channel = this.authChannel = undefined;
          if (failWait < max) failWait += base;
          pendingWait = base;
        }
        const wait = failed ? failWait : pendingWait;
        if (nowMs() + wait > deadline) {
          if (result === "timeout") throw new BrineError("MINION_AUTH_TIMEOUT", `${this.id}: no reply within the deadline`);
          if (result === "failed") throw new BrineError("MINION_AUTH_INVALID", `${this.id}: ${failure}`);
          if (result === "rejected") throw new BrineError("MINION_AUTH_REJECTED", this.id);
          throw new BrineError("MINION_AUTH_PENDING", `${this.id}: still pending after ${attempt} attempts`);
        }
        try {
          await this.timer.sleep(wait, signal);
        } catch {
          throw this.stopped();
        }
        if (!failed && pendingWait < max) pendingWait = Math.min(pendingWait * 2, max);
      }
    } finally {
      channel?.close();
      if (this.authChannel === channel) this.authChannel = undefined;
    }
  }

  /**
   * A request channel's transport as this minion's Salt drives it: 3007.x (v3) reopens the connection after a timed-out
   * try, its 300 ms poll later at most; 3006.8 (v2) keeps it and queues the tries (zmq-req-client.ts).
   */
  private newReqTransport(): ZmqReqTransport {
    return new ZmqReqTransport(
      { host: this.o.master, port: this.o.retPort, sourceIp: this.o.sourceIp },
      {
        context: this.o.context,
        timer: this.timer,
        afterTimeout: this.protocol === "v3" ? "reopen" : "wait",
        reopenDelayMaxMs: this.protocol === "v3" ? saltReopenPollMs : 0,
        onTimeout: (what, attempt, tries) => {
          this.stats.timeouts++;
          this.emit("timeout", { what: what ?? "request", attempt, tries });
        },
      },
    );
  }

  private setCreds(creds: Creds): void {
    if (!this.aesC || this.aesC.keyString !== creds.aes) this.aesC = new Crypticle(creds.aes);
    if (creds.session && (!this.sessionC || this.sessionC.keyString !== creds.session)) this.sessionC = new Crypticle(creds.session);
    this.creds_ = creds;
  }

  // ---- requests ----

  private pillarLoad(): Record<string, unknown> {
    return {
      id: this.id,
      grains: this.grains,
      saltenv: null,
      pillarenv: null,
      pillar_override: {},
      extra_minion_data: {},
      ver: "2",
      cmd: "_pillar",
    };
  }

  /**
   * A file of the master's fileserver as Salt's fileclient fetches it (`_serve_file` from offset 0, chunk after
   * chunk, until an empty one); undefined when the master has no such file (an empty `dest`).
   */
  async masterFile(filePath: string, saltenv: string): Promise<Buffer | undefined> {
    const parts: Buffer[] = [];
    for (let loc = 0; ; ) {
      const r = await this.channel.send({ cmd: "_serve_file", path: filePath, loc, saltenv }, this.requestOptions);
      if (!isMap(r)) throw new BrineError("MINION_BAD_REPLY", `_serve_file ${filePath}: the master answered ${typeof r}`);
      if (loc === 0 && !r.dest) return undefined;
      const d = r.data;
      const chunk = d instanceof Uint8Array ? Buffer.from(d) : Buffer.from(typeof d === "string" ? d : "", "utf8");
      if (!chunk.length) return Buffer.concat(parts);
      parts.push(chunk);
      loc += chunk.length;
    }
  }

  /** Python's time.asctime() in local time: "Sat Nov 21 15:54:02 2026". */
  private static asctime(d = new Date()): string {
    const days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    const p = (n: number) => String(n).padStart(2, "0");
    return `${days[d.getDay()]} ${months[d.getMonth()]} ${String(d.getDate()).padStart(2, " ")} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())} ${d.getFullYear()}`;
  }

  /** `_minion_event` with one tag, as `Minion._fire_master` sends it (v2 minions add `_stamp`). */
  fireEvent(tag: string, data: unknown, opts: RequestOptions = this.requestOptions): Promise<WireValue> {
    const load: Record<string, unknown> = { id: this.id, cmd: "_minion_event", pretag: null, tok: this.keys.tok, data, tag };
    if (this.protocol === "v2") load._stamp = saltStamp();
    return this.channel.send(load, opts);
  }

  // ---- peer publish and file pushes, as Salt's publish and cp modules send them ----

  /** The load a minion's publish/cp module sends: 3006.8 adds `tok` itself (v3 channels add it to every load). */
  private moduleLoad(load: Record<string, unknown>): Record<string, unknown> {
    return this.protocol === "v2" ? { ...load, tok: this.keys.tok } : load;
  }

  /**
   * `publish.publish` (form clean) and `publish.full_data` (form full), as salt/modules/publish.py `_publish`
   * with wait=True: `minion_pub`, then `pub_ret` every 0.3 s until every matched minion returned or
   * `timeoutS` passed. A falsy `minion_pub` answer (the master's refusal, `{}`) gives `{}`.
   */
  async peerPublish(tgt: string, fun: string, arg: unknown[] = [], o: { tgtType?: string; returner?: string; timeoutS?: number; form?: "clean" | "full" } = {}): Promise<unknown> {
    const form = o.form ?? "clean";
    const timeoutS = o.timeoutS ?? 5;
    if (fun.startsWith("publish.")) return {};
    const peer = await this.channel.send(this.moduleLoad({ cmd: "minion_pub", fun, arg, tgt, tgt_type: o.tgtType ?? "glob", ret: o.returner ?? "", tmo: timeoutS, form, id: this.id, no_parse: [] }), this.requestOptions);
    if (!pyTruthy(peer) || !isMap(peer)) return {};
    const matched = new Set(Array.isArray(peer.minions) ? (peer.minions as string[]) : []);
    let returned = new Set<string>();
    const differ = () => returned.size !== matched.size || [...matched].some((m) => !returned.has(m));
    // Salt's loop: until the returned and matched sets are equal; None when nothing was matched
    for (let loop = 0; differ(); loop++) {
      const ret = await this.channel.send(this.moduleLoad({ cmd: "pub_ret", id: this.id, jid: peer.jid }), this.requestOptions);
      const got = isMap(ret) ? ret : {};
      returned = new Set(Object.keys(got));
      let end = [...matched].every((m) => returned.has(m));
      if (!end && loop * 0.3 > timeoutS) {
        if (returned.size === 0) return {};
        end = true;
      }
      if (end) return form === "full" ? got : Object.fromEntries(Object.entries(got).map(([m, v]) => [m, isMap(v) ? v.ret : undefined]));
      await new Promise((r) => setTimeout(r, 300));
    }
    return null;
  }

  /** `publish.runner`: one `minion_runner` request; its answer as it came. */
  peerRunner(fun: string, arg: unknown[] = [], timeoutS = 5, opts: RequestOptions = this.requestOptions): Promise<WireValue> {
    return this.channel.send(this.moduleLoad({ cmd: "minion_runner", fun, arg, tmo: timeoutS, id: this.id, no_parse: [] }), opts);
  }

  /**
   * `cp.push` as salt/modules/cp.py sends a file: `_file_recv` chunks of `chunkBytes` (file_buffer_size) with
   * `loc`, the first one always (an empty file is one empty chunk); stops at the first falsy answer and returns it.
   */
  async push(pathSegments: string[], data: Buffer, chunkBytes = 262_144): Promise<WireValue> {
    for (let loc = 0; loc === 0 || loc < data.length; loc += chunkBytes) {
      const ret = await this.channel.send(this.moduleLoad({ cmd: "_file_recv", id: this.id, path: pathSegments, size: data.length, loc, data: data.subarray(loc, loc + chunkBytes) }), this.requestOptions);
      if (!pyTruthy(ret)) return ret;
      if (data.length === 0) break;
    }
    return true;
  }

  private async fireStartEvents(): Promise<void> {
    const data = `Minion ${this.id} started at ${TestMinion.asctime()}`;
    await this.fireEvent("minion_start", data);
    await this.fireEvent(`salt/minion/${this.id}/start`, data);
  }

  private onPubConnected(first: boolean): void {
    this.emit("pubConnected", { first });
    if (!first && this.state === "running") {
      this.fireEvent(`salt/minion/${this.id}/start`, `Minion ${this.id} started at ${TestMinion.asctime()}`).catch((e: Error) => this.emit("problem", { where: "reconnect event", error: e }));
    }
  }

  // ---- publishes ----

  private async onFrame(frame: Buffer): Promise<void> {
    const decoder = this.decoder;
    if (!decoder || this.state === "stopped") return;
    let outcome;
    try {
      outcome = await decoder.decode(frame);
    } catch (e) {
      if (!this.isStopped()) this.emit("problem", { where: "publish", error: e as Error });
      return;
    }
    if (outcome.kind === "drop") {
      this.stats.drops++;
      this.emit("drop", { reason: outcome.reason, detail: outcome.detail });
      return;
    }
    const load = outcome.load;
    if (!this.o.takeEveryPublish && !isForMe(load, { id: this.id, grains: this.grains, pillar: this.pillar })) return;
    const jid = load.jid;
    if (typeof jid !== "string" || jid.includes("/")) return;
    if (this.jidSet.has(jid)) return;
    this.jidSet.add(jid);
    this.jidQueue.push(jid);
    if (this.jidQueue.length > (this.o.jidQueueHwm ?? 100)) this.jidSet.delete(this.jidQueue.shift()!);
    const at = nowMs();
    this.stats.publishes++;
    const pl = load as unknown as PublishLoad;
    if (!Array.isArray(pl.arg)) pl.arg = [];
    this.emit("publish", { load: pl, at, reauthed: outcome.reauthed });
    if (this.o.onPublish) {
      try {
        await this.o.onPublish(pl);
      } catch (e) {
        this.emit("problem", { where: "onPublish", error: e as Error });
      }
      return;
    }
    await this.runJob(pl, at);
  }

  private async runJob(load: PublishLoad, at: number): Promise<void> {
    try {
      const outcome = await this.runner.run(load);
      if (this.isStopped()) return;
      if (this.holdReturns) {
        this.held.push({ load, at, outcome });
        return;
      }
      await this.sendReturn(load, at, outcome);
    } catch (e) {
      if (this.isStopped() && (isBrineError(e, "MINION_STOPPED") || this.abort.signal.aborted)) return;
      this.stats.returnFailures++;
      this.emit("returnFailed", { jid: load.jid, fun: load.fun, error: e as Error });
    }
  }

  /** Send the returns held while `holdReturns` was on, one after the other; failures are reported as returnFailed. */
  async sendHeldReturns(): Promise<void> {
    while (this.held.length > 0 && !this.isStopped()) {
      const { load, at, outcome } = this.held.shift()!;
      try {
        await this.sendReturn(load, at, outcome);
      } catch (e) {
        if (this.isStopped()) return;
        this.stats.returnFailures++;
        this.emit("returnFailed", { jid: load.jid, fun: load.fun, error: e as Error });
      }
    }
  }

  private async sendReturn(load: PublishLoad, at: number, outcome: Awaited<ReturnType<FunctionRunner["run"]>>): Promise<void> {
    const lo = this.o.returnTimeoutMinMs ?? 5_000;
    const hi = Math.max(lo, this.o.returnTimeoutMaxMs ?? 10_000);
    await this.channel.send(returnLoad(this.id, load, outcome), {
      timeoutMs: lo + Math.floor(Math.random() * (hi - lo + 1)),
      tries: this.o.returnTries ?? 3,
    });
    this.stats.returns++;
    this.emit("return", { jid: load.jid, fun: load.fun, ret: outcome.return, retcode: outcome.retcode, publishAt: at, ackAt: nowMs() });
  }
}

/** Python's truth value of a decoded reply: None, False, 0, "", and empty lists and dicts are false. */
function pyTruthy(v: WireValue | undefined): boolean {
  if (v === null || v === undefined || v === false || v === 0 || v === "") return false;
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof Uint8Array) return v.length > 0;
  if (isMap(v)) return Object.keys(v).length > 0;
  return true;
}
