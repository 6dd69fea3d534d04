/**
 * The HTTP API's options, read once at start from the master configuration's `rest_cherrypy:` mapping
 * (salt-api's own section, so an operator's existing salt-api config works unchanged) or `brine_api:`
 * (same keys; when both are present, `brine_api` entries win). Salt's names where Salt has them:
 * `port`, `host`, `ssl_crt`, `ssl_key`, `disable_ssl`, `debug`, `max_request_body_size`,
 * `webhook_disable_auth`, `webhook_url`, `stats_disable_auth`, `authorized_ips`; and from the master's
 * own options `netapi_enable_clients` and `rest_timeout`. brine's additions: `cors_origin` (rest_tornado's
 * name: a list of allowed origins, `*` for any; none by default, where rest_cherrypy echoes every origin),
 * `login_failures_per_minute` and `requests_per_minute` (per source address).
 *
 * Types, bounds and defaults are declared in src/shared/config/schema.ts (ApiSectionSchema). A bad value throws
 * BrineError("CONFIG_INVALID", "<section>.<option>: <why>") when the master starts.
 */
import type { Static } from "@sinclair/typebox";
import { BrineError } from "../shared/errors.js";
import { masterDefaults, type MasterConfig } from "../shared/config/defaults.js";
import { checkOption, readOption } from "../shared/config/options.js";
import { ApiSectionSchema } from "../shared/config/schema.js";

/** Salt's NetapiClient methods (salt/netapi/__init__.py CLIENTS). */
export const NETAPI_CLIENTS = ["local", "local_async", "local_batch", "local_subset", "runner", "runner_async", "ssh", "wheel", "wheel_async"] as const;
export type NetapiClientName = (typeof NETAPI_CLIENTS)[number];

export interface ApiOptions {
  /** the section the options came from, for messages */
  section: string;
  port: number;
  host: string;
  /** PEM files; both set unless `disableSsl` */
  sslCrt?: string;
  sslKey?: string;
  disableSsl: boolean;
  /** tracebacks in 500 answers, as rest_cherrypy's `debug` */
  debug: boolean;
  /** allowed CORS origins; empty: no CORS headers at all */
  corsOrigins: string[];
  /** request bodies above this many bytes get 413 (Salt's max_request_body_size, 1 MiB) */
  bodyBytesMax: number;
  webhookDisableAuth: boolean;
  /** the webhook's path prefix (Salt's webhook_url, "/hook") */
  webhookUrl: string;
  statsDisableAuth: boolean;
  /** when non-empty, only these source addresses are served (403 "Bad IP" otherwise) */
  authorizedIps: string[];
  /** failed /login attempts per source address per minute before 429 */
  loginFailuresPerMinute: number;
  /** requests per source address per minute before 429; 0: no limit */
  requestsPerMinute: number;
  /** clients this API runs (Salt's netapi_enable_clients; Salt's default is none) */
  enabledClients: Set<string>;
  /** how long the `runner` client waits for the runner's return, seconds (Salt's rest_timeout) */
  restTimeoutS: number;
  /** the default wait of the `local` client, seconds (the master's `timeout`) */
  timeoutS: number;
  gatherJobTimeoutS: number;
  /** a master of masters (order_masters): the `local` client waits at least this long for minions below syndics, seconds (syndic_wait) */
  syndicWaitS?: number;
}

/** Whether the master should start its API thread. */
export function apiConfigured(cfg: MasterConfig): boolean {
  const c = cfg as unknown as Record<string, unknown>;
  return isPlainMap(c.rest_cherrypy) || isPlainMap(c.brine_api);
}

function isPlainMap(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function readApiOptions(cfg: MasterConfig): ApiOptions {
  const c = cfg as unknown as Record<string, unknown>;
  const section = isPlainMap(c.brine_api) ? (isPlainMap(c.rest_cherrypy) ? "rest_cherrypy+brine_api" : "brine_api") : "rest_cherrypy";
  const raw: Record<string, unknown> = { ...(isPlainMap(c.rest_cherrypy) ? c.rest_cherrypy : {}), ...(isPlainMap(c.brine_api) ? c.brine_api : {}) };
  const bad = (k: string, why: string) => new BrineError("CONFIG_INVALID", `${section}.${k}: ${why}`);
  const props = ApiSectionSchema.properties;
  // type, bounds and default from the schema (src/shared/config/schema.ts)
  const opt = <K extends keyof typeof props>(k: K): Static<(typeof props)[K]> => {
    const v = raw[k];
    if (v === undefined || v === null) return (props[k] as { default?: unknown }).default as Static<(typeof props)[K]>;
    return checkOption(`${section}.${k}`, props[k], v) as Static<(typeof props)[K]>;
  };
  const str = (k: "ssl_crt" | "ssl_key" | "webhook_url"): string | undefined => {
    const v = opt(k);
    if (v === "") throw bad(k, "must be a non-empty string");
    return v;
  };
  const strList = (k: string, v: unknown): string[] => {
    if (v === undefined || v === null) return [];
    const list = typeof v === "string" ? [v] : v;
    if (!Array.isArray(list) || !list.every((x) => typeof x === "string" && x !== "")) throw bad(k, "must be a string or a list of strings");
    return list as string[];
  };

  const disableSsl = opt("disable_ssl");
  const sslCrt = str("ssl_crt");
  const sslKey = str("ssl_key");
  if (!disableSsl && (!sslCrt || !sslKey)) {
    // Salt logs "Not starting ... Options 'ssl_crt' and 'ssl_key' are required if SSL is not disabled." and runs no API
    throw bad("ssl_crt", "'ssl_crt' and 'ssl_key' are required unless 'disable_ssl: true'");
  }
  const webhookUrl = "/" + (str("webhook_url") ?? "").replace(/^\/+|\/+$/g, "");
  if (!/^\/[A-Za-z0-9_-]+(\/[A-Za-z0-9_-]+)*$/.test(webhookUrl)) throw bad("webhook_url", "must be a path of letters, digits, _ and -");

  const clients = strList("netapi_enable_clients", readOption(cfg, "netapi_enable_clients"));
  for (const cl of clients) if (!(NETAPI_CLIENTS as readonly string[]).includes(cl)) throw new BrineError("CONFIG_INVALID", `netapi_enable_clients: unknown client '${cl}' (known: ${NETAPI_CLIENTS.join(", ")})`);
  const restTimeout = readOption(cfg, "rest_timeout");

  const host = opt("host");
  if (host === "") throw bad("host", "must be a non-empty string");
  return {
    section,
    port: opt("port"),
    host,
    sslCrt,
    sslKey,
    disableSsl,
    debug: opt("debug"),
    corsOrigins: strList("cors_origin", opt("cors_origin")),
    bodyBytesMax: opt("max_request_body_size"),
    webhookDisableAuth: opt("webhook_disable_auth"),
    webhookUrl,
    statsDisableAuth: opt("stats_disable_auth"),
    authorizedIps: strList("authorized_ips", opt("authorized_ips")),
    loginFailuresPerMinute: opt("login_failures_per_minute"),
    requestsPerMinute: opt("requests_per_minute"),
    enabledClients: new Set(clients),
    restTimeoutS: restTimeout,
    timeoutS: readOption(cfg, "timeout"),
    gatherJobTimeoutS: readOption(cfg, "gather_job_timeout"),
    syndicWaitS: readOption(cfg, "order_masters") ? readOption(cfg, "syndic_wait") : undefined,
  };
}

/**
 * The master options the API thread is given: only what it reads (its own section, the bus socket, the
 * client defaults, nodegroups, external_auth for /login's `perms`), over Salt's defaults. Secrets of the
 * master's other parts (`sharedsecret`, `auth.ldap.bindpw`, cluster settings …) and the real `cachedir`
 * (where the root key lives) never reach it.
 */
export const API_THREAD_OPTIONS = ["id", "user", "conf_file", "sock_dir", "timeout", "gather_job_timeout", "order_masters", "syndic_wait", "nodegroups", "external_auth", "netapi_enable_clients", "rest_timeout", "rest_cherrypy", "brine_api", "brine_clear_request_bytes_max"] as const;

export function apiThreadConfig(cfg: MasterConfig): MasterConfig {
  const c = cfg as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = { ...masterDefaults() };
  for (const k of API_THREAD_OPTIONS) if (c[k] !== undefined) out[k] = c[k];
  return out as unknown as MasterConfig;
}
