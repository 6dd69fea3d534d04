/**
 * The main thread's side of the metrics: it owns the board (board.ts: created here, handed to the request
 * workers with the other shared buffers and to each runner thread), writes its own figures into it once a
 * second (lane depths, send queues: a few Atomics.store, nothing per request), and, when `brine_metrics` is
 * set (options.ts), serves them to Prometheus over HTTP.
 *
 * Why the main thread serves it: every figure the endpoint shows is either in the shared board or held by the
 * main thread (the lanes, the send queues, the Raft worker's client, the ring buffer), so a scrape reads memory
 * and awaits one status call; a thread of its own would cost a V8 isolate (megabytes, against the per-minion
 * memory goal) and a copy of those figures for every scrape. A scrape costs the main thread one rendering of
 * the text (bench/metrics.ts measures it); scrapes at once share one rendering, the server takes 16
 * connections at most, and requests pay nothing for it.
 *
 * prom-client provides the registry, the text format and the standard process figures (`process_*`,
 * `nodejs_*`: RSS, CPU, open fds, event loop delay, heap, GC). The board's figures are read, not observed, so
 * each family is registered as an object prom-client's Registry formats like its own (get() → values).
 */
import http from "node:http";
// prom-client (and the OpenTelemetry API it loads) only when the endpoint is on: start() imports it
import type { Registry, Metric } from "prom-client";
import { BrineError } from "../shared/errors.js";
import type { MasterConfig } from "../shared/config/defaults.js";
import { getLogger } from "../shared/log.js";
import type { NodeStatus } from "../workers/raft/api.js";
import { RingReader } from "../shared/sab-ring/reader.js";
import { G_BUS_DROPPED, G_BUS_EVENTS, G_BUS_READERS, G_LANE_DEPTH, G_PUB_FRAMES, G_SAMPLED_AT_MS, G_SENDQ_DROPPED, G_SENDQ_LENGTH, G_SIGNINS_RESENT,
  G_HANDSHAKE_TIMEOUTS, G_NONCE_OWNER, G_PUBLISHER, MetricsBoard } from "../shared/metrics/board.js";
import { families, labelText, type Family } from "../shared/metrics/families.js";
import { readMetricsOptions, type MetricsOptions } from "./metrics-options.js";
import { readStateSyncStatus } from "../shared/state-sync-status.js";

const log = getLogger("brine.metrics");

/** How often the main thread writes its own figures into the board, ms. */
export const mainSampleEveryMs = 1000;
/** Connected minions are counted by a request worker (presence.ts) at most this often, ms. */
export const connectedRefreshMs = 30_000;
/**
 * A scrape waits this long for the Raft worker's status (then goes without the Raft figures), and for the first
 * count of connected minions (later scrapes show the last count while a new one is made: a request worker busy
 * with a return flood must not make the scrape time out), ms.
 */
export const scrapeWaitMs = 2000;
/** Connections the endpoint serves at once. */
export const metricsConnectionsMax = 16;

/** What the main thread knows that the board does not. */
export interface MainFigures {
  /** per lane (labels.ts LANES): frames waiting in it or worked on */
  laneDepth(): readonly number[];
  /** per send queue (labels.ts SEND_QUEUES) */
  sendQueues(): readonly { length: number; dropped: number }[];
  /** frames sent on the publish port */
  publishFrames?(): number;
  /** sign-ins sent again answered from the request port's memory (sign-in-replies.ts) */
  signInsResent?(): number;
  /** per minion-facing port (labels.ts MINION_PORTS): connections closed for not finishing their handshake in time */
  handshakeTimeouts?(): readonly number[];
  /** the publisher thread's totals, by labels.ts PUBLISHER_COUNTS */
  publisher?(): readonly number[];
  /** clustered: the nonce owner check's totals, by labels.ts NONCE_OWNER_COUNTS */
  nonceOwner?(): readonly number[] | undefined;
  /** the event bus: events published, readers now, readers dropped per reason (labels.ts BUS_DROP_REASONS) */
  eventBus?(): { events: number; readers: number; dropped: readonly number[] };
  /** accepted minions connected to this master (asks a request worker) */
  connected(): Promise<number>;
  /** clustered: the Raft worker's status */
  raftStatus?(): Promise<NodeStatus>;
  /** clustered: the shared ring buffer */
  ringBuffer?(): SharedArrayBuffer | undefined;
  /** clustered: the cachedir holding the state-sync thread's status file (read at each scrape: a few KiB) */
  stateSyncCachedir?: string;
}

/** One family as a prom-client metric: get() returns the family's samples from the last scrape. */
class FamilyMetric {
  readonly aggregator = "sum";
  family: Family | undefined;
  /** counters as last reported, so a counter never goes down (board.ts: a carry read mid-way) */
  private readonly reported = new Map<string, number>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: Family["type"],
  ) {}

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: { labels: Record<string, string | number>; value: number; metricName?: string }[] }> {
    const f = this.family;
    const values: { labels: Record<string, string | number>; value: number; metricName?: string }[] = [];
    if (f?.type === "histogram") {
      for (const s of f.samples) {
        f.le.forEach((le, i) => values.push({ labels: { ...s.labels, le }, value: s.cumulative[i]!, metricName: `${f.name}_bucket` }));
        values.push({ labels: { ...s.labels, le: "+Inf" }, value: s.count, metricName: `${f.name}_bucket` });
        values.push({ labels: s.labels, value: s.sum, metricName: `${f.name}_sum` });
        values.push({ labels: s.labels, value: s.count, metricName: `${f.name}_count` });
      }
    } else if (f) {
      for (const s of f.samples) {
        let value = s.value;
        if (f.type === "counter") {
          const key = labelText(s.labels);
          value = Math.max(value, this.reported.get(key) ?? 0);
          this.reported.set(key, value);
        }
        values.push({ labels: s.labels, value });
      }
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {}
}

/** `p`'s value, or undefined when it takes longer than `ms`. */
async function within<T>(p: Promise<T | undefined>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

export class MetricsHost {
  readonly board = new MetricsBoard();
  readonly options: MetricsOptions | undefined;
  private figures: MainFigures | undefined;
  private timer: NodeJS.Timeout | undefined;
  private server: http.Server | undefined;
  private registry: Registry | undefined;
  private readonly metrics = new Map<string, FamilyMetric>();
  private ring: RingReader | undefined;
  private connectedCache: { at: number; n: number } | undefined;
  private connectedRun: Promise<number> | undefined;
  private rendering: Promise<string> | undefined;

  /** Reads `brine_metrics` (a bad value throws CONFIG_INVALID here, before anything starts). */
  constructor(cfg: MasterConfig) {
    this.options = readMetricsOptions(cfg);
  }

  get sab(): SharedArrayBuffer {
    return this.board.sab;
  }

  /** Starts the sampling timer and, when `brine_metrics` is set, the endpoint. */
  async start(figures: MainFigures): Promise<void> {
    this.figures = figures;
    this.sample();
    this.timer = setInterval(() => this.sample(), mainSampleEveryMs);
    this.timer.unref();
    if (!this.options) return;
    const { Registry, collectDefaultMetrics } = await import("prom-client");
    const reg = new Registry();
    collectDefaultMetrics({ register: reg });
    this.registry = reg;
    const o = this.options;
    const server = http.createServer((req, res) => this.serve(req, res));
    server.maxConnections = metricsConnectionsMax;
    server.requestTimeout = 10_000;
    server.headersTimeout = 10_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", (e: Error) => reject(new BrineError("CONFIG_INVALID", `brine_metrics: cannot listen on ${o.host}:${o.port}: ${e.message}`)));
      server.listen(o.port, o.host, () => resolve());
    });
    server.on("error", (e) => log.error(`metrics endpoint: ${e.message}`));
    this.server = server;
    log.info(`metrics endpoint on http://${o.host.includes(":") ? `[${o.host}]` : o.host}:${this.port}${o.path}`);
  }

  /** The endpoint's port (the system's choice for `port: 0`), when it runs. */
  get port(): number | undefined {
    const a = this.server?.address();
    return a && typeof a === "object" ? a.port : undefined;
  }

  /** Writes the main thread's figures into the board (every mainSampleEveryMs, and before each scrape). */
  sample(): void {
    const f = this.figures;
    if (!f) return;
    f.laneDepth().forEach((n, i) => this.board.setGauge(G_LANE_DEPTH + i, n));
    f.sendQueues().forEach((q, i) => {
      this.board.setGauge(G_SENDQ_LENGTH + i, q.length);
      this.board.setGauge(G_SENDQ_DROPPED + i, q.dropped);
    });
    if (f.publishFrames) this.board.setGauge(G_PUB_FRAMES, f.publishFrames());
    if (f.signInsResent) this.board.setGauge(G_SIGNINS_RESENT, f.signInsResent());
    f.handshakeTimeouts?.().forEach((n, p) => this.board.setGauge(G_HANDSHAKE_TIMEOUTS + p, n));
    f.publisher?.().forEach((n, i) => this.board.setGauge(G_PUBLISHER + i, n));
    f.nonceOwner?.()?.forEach((n, i) => this.board.setGauge(G_NONCE_OWNER + i, n));
    const bus = f.eventBus?.();
    if (bus) {
      this.board.setGauge(G_BUS_EVENTS, bus.events);
      this.board.setGauge(G_BUS_READERS, bus.readers);
      bus.dropped.forEach((n, r) => this.board.setGauge(G_BUS_DROPPED + r, n));
    }
    this.board.setGauge(G_SAMPLED_AT_MS, Date.now());
  }

  /** The last count of connected minions (a new one is started when it is older than connectedRefreshMs). */
  private async connected(): Promise<number | undefined> {
    const c = this.connectedCache;
    if (!c || Date.now() - c.at >= connectedRefreshMs) {
      this.connectedRun ??= this.figures!.connected()
        .then((n) => {
          this.connectedCache = { at: Date.now(), n };
          return n;
        })
        .finally(() => (this.connectedRun = undefined));
    }
    if (c) return c.n;
    return within(this.connectedRun!.catch(() => undefined), scrapeWaitMs);
  }

  /** Every family, read now. */
  async families(): Promise<Family[]> {
    this.sample();
    const f = this.figures!;
    const connected = await this.connected();
    const raft = f.raftStatus ? await within(f.raftStatus().catch(() => undefined), scrapeWaitMs) : undefined;
    const sab = f.ringBuffer?.();
    if (sab && !this.ring) this.ring = new RingReader(sab);
    const ss = f.stateSyncCachedir ? readStateSyncStatus(f.stateSyncCachedir) : undefined;
    return families({
      board: this.board.read(),
      ...(connected !== undefined ? { connected } : {}),
      ...(raft ? { raft } : {}),
      ...(sab ? { ring: this.ring } : {}),
      ...(ss && "status" in ss ? { stateSync: ss.status, now: Date.now() } : {}),
    });
  }

  /** The text Prometheus reads. */
  async render(): Promise<string> {
    const reg = this.registry!;
    for (const fam of await this.families()) {
      let m = this.metrics.get(fam.name);
      if (!m) {
        m = new FamilyMetric(fam.name, fam.help, fam.type);
        reg.registerMetric(m as unknown as Metric);
        this.metrics.set(fam.name, m);
      }
      m.family = fam;
    }
    return reg.metrics();
  }

  private serve(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== this.options!.path) {
      res.writeHead(404, { "content-type": "text/plain" }).end(`metrics are at ${this.options!.path}\n`);
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD" }).end();
      return;
    }
    // scrapes that arrive together share one rendering
    this.rendering ??= this.render().finally(() => (this.rendering = undefined));
    this.rendering.then(
      (text) => res.writeHead(200, { "content-type": this.registry!.contentType }).end(req.method === "HEAD" ? undefined : text),
      (e: Error) => {
        log.error(`metrics scrape failed: ${e.stack ?? e.message}`);
        res.writeHead(500, { "content-type": "text/plain" }).end("metrics could not be read\n");
      },
    );
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    const s = this.server;
    this.server = undefined;
    if (s) {
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    }
  }
}
