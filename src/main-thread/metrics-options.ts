/**
 * `brine_metrics`: the Prometheus endpoint, off unless the master configuration has the line. One line turns it
 * on: `brine_metrics: {port: 9108}` (or `brine_metrics: true` for every default). Keys: `port` (9108; 0 lets
 * the system choose, for tests), `host` (127.0.0.1: the figures name minions' functions and the cluster's
 * nodes, so the endpoint stays on loopback unless the operator says otherwise), `path` (/metrics).
 * A bad value throws BrineError("CONFIG_INVALID", "brine_metrics.<key>: <why>") when the master starts.
 */
import { isIP } from "node:net";
import { BrineError } from "../shared/errors.js";
import type { MasterConfig } from "../shared/config/defaults.js";
import { MetricsSectionSchema } from "../shared/config/schema.js";

// declared in src/shared/config/schema.ts (MetricsSectionSchema)
const declared = MetricsSectionSchema.properties;
export const METRICS_PORT_DEFAULT = declared.port.default as number;
export const METRICS_HOST_DEFAULT = declared.host.default as string;
export const METRICS_PATH_DEFAULT = declared.path.default as string;

export interface MetricsOptions {
  port: number;
  host: string;
  path: string;
}

/** The endpoint's options, or undefined when it is off (no `brine_metrics`, or false). */
export function readMetricsOptions(cfg: MasterConfig): MetricsOptions | undefined {
  const raw = cfg.brine_metrics;
  if (raw === undefined || raw === null || raw === false) return undefined;
  const bad = (k: string, why: string) => new BrineError("CONFIG_INVALID", `brine_metrics${k ? `.${k}` : ""}: ${why}`);
  if (raw === true) return { port: METRICS_PORT_DEFAULT, host: METRICS_HOST_DEFAULT, path: METRICS_PATH_DEFAULT };
  if (typeof raw !== "object" || Array.isArray(raw)) throw bad("", "must be a mapping such as {port: 9108, host: 127.0.0.1}, true or false");
  const m = raw as Record<string, unknown>;
  for (const k of Object.keys(m)) if (!["port", "host", "path"].includes(k)) throw bad(k, "unknown key (known: port, host, path)");
  const portRaw = m.port ?? METRICS_PORT_DEFAULT;
  const port = typeof portRaw === "string" && /^\d+$/.test(portRaw) ? Number(portRaw) : portRaw;
  if (typeof port !== "number" || !Number.isInteger(port) || port < 0 || port > 65535) throw bad("port", "must be an integer from 0 to 65535");
  const host = m.host ?? METRICS_HOST_DEFAULT;
  if (typeof host !== "string" || (isIP(host) === 0 && !/^[A-Za-z0-9.-]{1,253}$/.test(host))) throw bad("host", "must be an IP address or a host name");
  const path = m.path ?? METRICS_PATH_DEFAULT;
  if (typeof path !== "string" || !/^\/[A-Za-z0-9._~\/-]{0,200}$/.test(path)) throw bad("path", "must be a URL path such as /metrics");
  return { port, host, path };
}
