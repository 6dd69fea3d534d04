/**
 * salt-api's rest_cherrypy HTTP API (salt/netapi/rest_cherrypy/app.py), served by fastify in the API
 * thread: the same URLs, request bodies (JSON, YAML, form, text), `Accept` negotiation (JSON or YAML),
 * `X-Auth-Token` header and `session_id` cookie, response shapes and status codes. Every operation is a
 * clear request to the master (src/api/netapi.ts); this file only parses, checks shapes, limits and
 * formats.
 *
 * Differences from rest_cherrypy, on purpose: the session token is the Salt eauth token itself (no
 * server-side session table, so nothing here can be forged into a session and any master of a cluster
 * knows it); CORS headers only for configured origins (`cors_origin`; rest_cherrypy reflects every
 * origin with credentials); the session cookie is HttpOnly and SameSite=Lax; a webhook event never
 * carries the caller's `X-Auth-Token`, `Cookie` or `Authorization` header (any token holder can read the
 * bus through /events); errors are answered in the negotiated format as `{"status": N, "return": msg}`.
 */
import { readFileSync } from "node:fs";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import cookie from "@fastify/cookie";
import cors from "@fastify/cors";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import type { MasterConfig } from "../shared/config/defaults.js";
import { yamlifyArg } from "../lib/client/args.js";
import { plain } from "../lib/output/outputters.js";
import { getLogger } from "../shared/log.js";
import { isMap, type WireValue } from "../shared/protocol/msgpack.js";
import { validJid } from "../shared/protocol/ids.js";
import { ApiError, Netapi, TOKEN_RE, checkTarget } from "./netapi.js";
import { NETAPI_CLIENTS, type ApiOptions } from "./options.js";
import { PerSourceCounter } from "./rate-limit.js";
import type { EventFeed } from "./bus-feed.js";
import { tarFiles } from "./tar.js";

const log = getLogger("brine.api");

/** Lowstate chunks in one request; more get 400 (each is run in turn, as rest_cherrypy does). */
export const lowstateChunksMax = 64;
/** An /events client this far behind is dropped (its socket's unsent bytes). */
export const sseBacklogBytesMax = 16 * 1024 * 1024;
/** How often an /events stream re-checks its token with the master and writes a keep-alive comment. */
export const sseRecheckMs = 30_000;
/** Segments and characters of a webhook tag below `salt/netapi/hook/`. */
const HOOK_SEGMENT_RE = /^[A-Za-z0-9_.:@+=,~-]{1,128}$/;
const hookSegmentsMax = 16;
/** Headers never copied into a webhook event. */
const HOOK_HEADERS_DROPPED = new Set(["x-auth-token", "cookie", "authorization"]);
const COOKIE = "session_id";

export interface AppDeps {
  cfg: MasterConfig;
  opts: ApiOptions;
  netapi: Netapi;
  feed: EventFeed;
  fire: (tag: string, data: unknown) => void;
  /** requests waiting for the master (for /stats) */
  masterInFlight: () => number;
  /** how often an /events stream re-checks its token (tests shorten it); sseRecheckMs by default */
  sseRecheckMs?: number;
}

type Format = "json" | "yaml";
const CONTENT_TYPE: Record<Format, string> = { json: "application/json", yaml: "application/x-yaml" };

/** rest_cherrypy's ct_out_map: JSON or YAML by the Accept header (JSON when absent or any type); undefined: 406. */
export function negotiate(accept: string | undefined): Format | undefined {
  if (!accept || !accept.trim()) return "json";
  const entries = accept.split(",").map((part, i) => {
    const [type, ...params] = part.trim().toLowerCase().split(";");
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    return { type: type!.trim(), q: q ? Number(q.slice(2)) : 1, i };
  });
  entries.sort((a, b) => b.q - a.q || a.i - b.i);
  for (const e of entries) {
    if (!(e.q > 0)) continue;
    if (e.type === "application/json" || e.type === "application/*" || e.type === "*/*") return "json";
    if (e.type === "application/x-yaml" || e.type === "text/yaml") return "yaml";
  }
  return undefined;
}

export function toJson(v: unknown): string {
  return JSON.stringify(plain(v));
}

function serialize(v: unknown, f: Format): string {
  return f === "json" ? toJson(v) : stringifyYaml(plain(v));
}

/** Salt's urlencoded_processor: repeated keys become lists; `arg` and `kwarg` are YAML-parsed as on the CLI. */
function parseForm(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of new URLSearchParams(text)) {
    const cur = out[k];
    out[k] = cur === undefined ? v : Array.isArray(cur) ? [...cur, v] : [cur, v];
  }
  if (typeof out.kwarg === "string") out.kwarg = yamlifyArg(out.kwarg);
  if (out.arg !== undefined) out.arg = (Array.isArray(out.arg) ? out.arg : [out.arg]).map((a) => yamlifyArg(String(a)));
  return out;
}

/** rest_cherrypy's lowdata_fmt: a single mapping becomes a one-chunk lowstate, `arg` always a list. */
function lowdataFmt(data: unknown): unknown {
  if (data && typeof data === "object" && !Array.isArray(data)) {
    const d = { ...(data as Record<string, unknown>) };
    if ("arg" in d && !Array.isArray(d.arg)) d.arg = [d.arg];
    return [d];
  }
  return data;
}

/** Salt's sum_permissions + sorted_permissions: what /login reports the user may do (display only). */
function permissions(cfg: MasterConfig, token: Record<string, WireValue>): unknown[] {
  if (Array.isArray(token.auth_list)) return token.auth_list;
  const ea = (cfg as unknown as Record<string, unknown>).external_auth;
  const conf = isMap(ea as WireValue) ? (ea as Record<string, unknown>)[String(token.eauth)] : undefined;
  if (!conf || typeof conf !== "object") return [];
  const c = conf as Record<string, unknown>;
  const perms: unknown[] = [];
  const add = (v: unknown) => Array.isArray(v) && perms.push(...v);
  add(c[String(token.name)]);
  add(c["*"]);
  if (Array.isArray(token.groups)) for (const g of token.groups) add(c[`${String(g)}%`]);
  const strs = [...new Set(perms.filter((p): p is string => typeof p === "string"))].sort();
  const seen = new Set<string>();
  const others = perms.filter((p) => typeof p !== "string" && !seen.has(JSON.stringify(p)) && seen.add(JSON.stringify(p)));
  return [...strs, ...others.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))];
}

export async function buildApp(d: AppDeps): Promise<FastifyInstance> {
  const { opts, netapi } = d;
  const https = opts.disableSsl ? null : { cert: readFileSync(opts.sslCrt!), key: readFileSync(opts.sslKey!) };
  const app = Fastify({ bodyLimit: opts.bodyBytesMax, logger: false, routerOptions: { ignoreTrailingSlash: true }, ...(https ? { https } : {}) }) as unknown as FastifyInstance;
  const stats = { started: Date.now() / 1000, requests: 0, status: {} as Record<string, number>, loginFailures: 0, rateLimited: 0, sseClients: 0 };
  const loginFailures = new PerSourceCounter(opts.loginFailuresPerMinute);
  const requests = opts.requestsPerMinute > 0 ? new PerSourceCounter(opts.requestsPerMinute) : undefined;

  await app.register(cookie);
  if (opts.corsOrigins.length) {
    await app.register(cors, {
      origin: opts.corsOrigins.includes("*") ? true : opts.corsOrigins,
      credentials: true,
      methods: ["GET", "POST"],
      allowedHeaders: ["Content-Type", "X-Auth-Token", "X-Requested-With"],
      maxAge: 1400,
    });
  }

  // --- bodies (rest_cherrypy's hypermedia_in) ---
  /** each request's body text as it came (a webhook event carries it as `body`, as Salt's raw_body) */
  const rawBodies = new WeakMap<FastifyRequest, string>();
  app.removeAllContentTypeParsers();
  const textParser = (parseBody: (s: string) => unknown) => (req: FastifyRequest, body: string, done: (e: Error | null, v?: unknown) => void) => {
    rawBodies.set(req, body);
    if (body === "") return done(null, null);
    try {
      done(null, parseBody(body));
    } catch (e) {
      done(e instanceof ApiError ? e : new ApiError(400, String(e)));
    }
  };
  app.addContentTypeParser("application/json", { parseAs: "string" }, textParser((s) => {
    try {
      return JSON.parse(s);
    } catch {
      throw new ApiError(400, "Invalid JSON document");
    }
  }));
  const yaml = textParser((s) => {
    try {
      return parseYaml(s, { maxAliasCount: 100 });
    } catch {
      throw new ApiError(400, "Invalid YAML document");
    }
  });
  app.addContentTypeParser(["application/x-yaml", "text/yaml"], { parseAs: "string" }, yaml);
  app.addContentTypeParser("text/plain", { parseAs: "string" }, textParser((s) => {
    try {
      return JSON.parse(s);
    } catch {
      return s;
    }
  }));
  app.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, textParser(parseForm));
  app.addContentTypeParser("*", (_req, _payload, done) => done(new ApiError(406, "Content type not supported")));

  const source = (req: FastifyRequest) => req.ip;
  /** how the master's audit lines and login throttle name an API client */
  const origin = (req: FastifyRequest) => `http:${req.ip}`;

  const answer = (req: FastifyRequest, reply: FastifyReply, status: number, value: unknown) => {
    const f = negotiate(req.headers.accept) ?? "json";
    stats.status[status] = (stats.status[status] ?? 0) + 1;
    return reply.code(status).type(CONTENT_TYPE[f]).send(serialize(value, f));
  };

  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, req, reply) => {
    let status = err instanceof ApiError ? err.status : err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    let message = err.message;
    if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
      status = 413;
      message = `Request body exceeds max_request_body_size (${opts.bodyBytesMax} bytes)`;
    } else if (err.code === "API_MASTER") {
      status = 503;
      message = "Salt Master is not available.";
    } else if (err.code === "API_REQUEST_TOO_LARGE") status = 413;
    else if (err.code === "API_BAD_REQUEST") status = 400;
    else if (err.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE") status = 406;
    if (status >= 500) {
      log.error(`HTTP API ${req.method} ${req.url} from ${source(req)}: ${err.stack ?? err.message}`);
      if (status === 500) message = opts.debug ? (err.stack ?? message) : "An unexpected error occurred";
    } else log.warning(`HTTP API refused ${req.method} ${req.url.split("?")[0]} from ${source(req)}: ${status} ${message}`);
    if (status === 401) reply.header("WWW-Authenticate", "Session");
    if (status === 503) reply.header("Retry-After", "1");
    return answer(req, reply, status, { status, return: message });
  });
  app.setNotFoundHandler((req, reply) => answer(req, reply, 404, { status: 404, return: `The path '${req.url.split("?")[0]}' was not found.` }));

  app.addHook("onRequest", async (req, reply) => {
    stats.requests++;
    const src = source(req);
    if (opts.authorizedIps.length && !opts.authorizedIps.includes(src)) {
      log.error(`Blocked IP: ${src}`);
      throw new ApiError(403, "Bad IP");
    }
    if (requests) {
      if (requests.exceeded(src)) {
        stats.rateLimited++;
        reply.header("Retry-After", String(requests.retryAfterS(src)));
        throw new ApiError(429, `Too many requests from ${src}: at most ${opts.requestsPerMinute} a minute (requests_per_minute)`);
      }
      requests.add(src);
    }
    // /events (text/event-stream, what EventSource asks for) and POST /keys (a tar) answer in their own type, as in rest_cherrypy
    const p = req.url.split("?")[0]!.replace(/(.)\/+$/, "$1");
    const ownType = p === "/events" || (req.method === "POST" && p === "/keys");
    if (!ownType && negotiate(req.headers.accept) === undefined) throw new ApiError(406, "Requested Content-Type not available: application/json or application/x-yaml");
  });

  /** X-Auth-Token trumps the session cookie (salt_token_tool). */
  const sessionToken = (req: FastifyRequest): string | undefined => {
    const h = req.headers["x-auth-token"];
    const x = Array.isArray(h) ? h[0] : h;
    return x || req.cookies[COOKIE] || undefined;
  };
  /** salt_auth_tool: a request without a session is 401 before anything runs. */
  const requireSession = (req: FastifyRequest): string => {
    const t = sessionToken(req);
    if (!t) throw new ApiError(401, "Authentication required");
    return t;
  };
  /** A session the master knows (for endpoints that do not send the token on to the master anyway). */
  const requireValidSession = async (req: FastifyRequest): Promise<Record<string, WireValue>> => {
    const t = requireSession(req);
    const tok = await netapi.getToken(t, origin(req));
    if (!tok) throw new ApiError(401, "Invalid token");
    return tok;
  };

  /** LowDataAdapter.exec_lowstate */
  const execLowstate = async (req: FastifyRequest, body: unknown, token?: string, client?: string): Promise<unknown[]> => {
    const lowstate = lowdataFmt(body);
    if (!Array.isArray(lowstate)) throw new ApiError(400, "Lowstates must be a list");
    if (lowstate.length > lowstateChunksMax) throw new ApiError(400, `At most ${lowstateChunksMax} lowstate chunks in one request`);
    const out: unknown[] = [];
    for (const raw of lowstate) {
      if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new ApiError(400, "Each lowstate chunk must be a mapping");
      const chunk = { ...(raw as Record<string, unknown>) };
      if (token) chunk.token = token;
      if ("token" in chunk && !(typeof chunk.token === "string" && TOKEN_RE.test(chunk.token))) throw new ApiError(401, "Invalid token");
      if (client) chunk.client = client;
      if ("arg" in chunk && !Array.isArray(chunk.arg)) chunk.arg = [chunk.arg];
      out.push(await netapi.run(chunk, origin(req)));
    }
    return out;
  };

  // --- / and /run ---
  app.get("/", async (req, reply) => answer(req, reply, 200, { return: "Welcome", clients: NETAPI_CLIENTS }));
  app.post("/", async (req, reply) => {
    const token = requireSession(req);
    return answer(req, reply, 200, { return: await execLowstate(req, req.body, token) });
  });
  app.post("/run", async (req, reply) => answer(req, reply, 200, { return: await execLowstate(req, req.body) }));

  // --- /login, /logout, /token ---
  app.get("/login", async (req, reply) => {
    reply.header("WWW-Authenticate", "Session");
    return answer(req, reply, 200, { status: 200, return: "Please log in" });
  });
  app.post("/login", async (req, reply) => {
    const src = source(req);
    if (loginFailures.exceeded(src)) {
      stats.rateLimited++;
      reply.header("Retry-After", String(loginFailures.retryAfterS(src)));
      throw new ApiError(429, `Too many failed logins from ${src}: at most ${opts.loginFailuresPerMinute} a minute (login_failures_per_minute)`);
    }
    const low = lowdataFmt(req.body);
    const creds = Array.isArray(low) && low[0] && typeof low[0] === "object" ? (low[0] as Record<string, unknown>) : {};
    const tok = typeof creds.eauth === "string" && typeof creds.username === "string" ? await netapi.mkToken(creds, origin(req)) : undefined;
    if (!tok) {
      stats.loginFailures++;
      const n = loginFailures.add(src);
      log.warning(`HTTP API login failed for user ${JSON.stringify(String(creds.username ?? "")).slice(0, 80)} (eauth ${JSON.stringify(String(creds.eauth ?? "")).slice(0, 40)}) from ${src} (${n} in this minute)`);
      throw new ApiError(401, "Could not authenticate using provided credentials");
    }
    const token = String(tok.token);
    reply.header("X-Auth-Token", token);
    reply.setCookie(COOKIE, token, { path: "/", httpOnly: true, sameSite: "lax", secure: !opts.disableSsl, expires: new Date(Number(tok.expire) * 1000) });
    return answer(req, reply, 200, {
      return: [{ token, expire: tok.expire, start: tok.start, user: tok.name, eauth: tok.eauth, perms: permissions(d.cfg, tok) }],
    });
  });
  app.post("/logout", async (req, reply) => {
    const tok = await requireValidSession(req);
    await netapi.rmToken(String(tok.token), origin(req));
    reply.clearCookie(COOKIE, { path: "/" });
    return answer(req, reply, 200, { return: "Your token has been cleared" });
  });
  app.post("/token", async (req, reply) => {
    const low = lowdataFmt(req.body);
    if (!Array.isArray(low)) throw new ApiError(400, "Lowstates must be a list");
    const out: unknown[] = [];
    for (const creds of low as Record<string, unknown>[]) {
      if (!creds || typeof creds !== "object" || !("username" in creds && "password" in creds && "eauth" in creds)) {
        throw new ApiError(400, 'Require "username", "password", and "eauth" params');
      }
      const tok = await netapi.mkToken(creds, origin(req));
      if (!tok) throw new ApiError(401, "Could not authenticate using provided credentials");
      out.push(tok);
    }
    return answer(req, reply, 200, out);
  });

  // --- /minions ---
  const minions = async (req: FastifyRequest<{ Params: { mid?: string } }>, reply: FastifyReply) => {
    const token = requireSession(req);
    const tgt = req.params.mid ? checkTarget(req.params.mid) : "*";
    return answer(req, reply, 200, { return: await execLowstate(req, [{ client: "local", tgt, fun: "grains.items" }], token) });
  };
  app.get("/minions", minions);
  app.get("/minions/:mid", minions);
  app.post("/minions", async (req, reply) => {
    const token = requireSession(req);
    const jobs = (await execLowstate(req, req.body, token, "local_async")) as Record<string, unknown>[];
    return answer(req, reply, 202, {
      return: jobs,
      _links: { jobs: jobs.filter((j) => j && j.jid).map((j) => ({ href: `/jobs/${String(j.jid)}` })) },
    });
  });

  // --- /jobs ---
  app.get("/jobs", async (req, reply) => {
    const token = requireSession(req);
    const [ret] = await execLowstate(req, [{ client: "runner", fun: "jobs.list_jobs" }], token);
    return answer(req, reply, 200, { return: [ret] });
  });
  app.get("/jobs/:jid", async (req: FastifyRequest<{ Params: { jid: string } }>, reply) => {
    const token = requireSession(req);
    const jid = req.params.jid;
    if (!validJid(jid)) throw new ApiError(400, `Invalid jid '${String(jid).slice(0, 40)}'`);
    const [info] = (await execLowstate(req, [{ client: "runner", fun: "jobs.list_job", jid }], token)) as Record<string, unknown>[];
    const result = info && typeof info === "object" && info.Result && typeof info.Result === "object" ? (info.Result as Record<string, Record<string, unknown>>) : {};
    const returns: Record<string, unknown> = {};
    for (const [mid, r] of Object.entries(result)) returns[mid] = r && typeof r === "object" ? r.return : r;
    return answer(req, reply, 200, { info: [info], return: [returns] });
  });

  // --- /keys ---
  const keys = async (req: FastifyRequest<{ Params: { mid?: string } }>, reply: FastifyReply) => {
    const token = requireSession(req);
    const low = req.params.mid ? { client: "wheel", fun: "key.finger", match: checkTarget(req.params.mid) } : { client: "wheel", fun: "key.list_all" };
    const [r] = (await execLowstate(req, [low], token)) as Record<string, unknown>[];
    const data = r && isMap(r.data as WireValue) ? (r.data as Record<string, unknown>) : {};
    return answer(req, reply, 200, { return: data.return ?? {} });
  };
  app.get("/keys", keys);
  app.get("/keys/:mid", keys);
  app.post("/keys", async (req, reply) => {
    const low = lowdataFmt(req.body);
    const chunk = Array.isArray(low) && low[0] && typeof low[0] === "object" ? { ...(low[0] as Record<string, unknown>) } : {};
    Object.assign(chunk, { client: "wheel", fun: "key.gen_accept" });
    if ("mid" in chunk) {
      chunk.id_ = chunk.mid;
      delete chunk.mid;
    }
    if (typeof chunk.id_ !== "string") throw new ApiError(400, "mid (the minion id) is required");
    checkTarget(chunk.id_);
    const [r] = (await execLowstate(req, [chunk])) as Record<string, unknown>[];
    const data = r && isMap(r.data as WireValue) ? (r.data as Record<string, unknown>) : {};
    const ret = isMap(data.return as WireValue) ? (data.return as Record<string, unknown>) : {};
    const tar = tarFiles([
      { name: "minion.pub", content: Buffer.from(String(ret.pub ?? "")) },
      { name: "minion.pem", content: Buffer.from(String(ret.priv ?? "")), mode: 0o600 },
    ]);
    stats.status[200] = (stats.status[200] ?? 0) + 1;
    return reply
      .code(200)
      .header("Content-Disposition", `attachment; filename="saltkeys-${String(chunk.id_).replace(/[^A-Za-z0-9_.-]/g, "_")}.tar"`)
      .header("Cache-Control", "no-cache")
      .type("application/x-tar")
      .send(tar);
  });

  // --- /events (Server-Sent Events of the bus) ---
  /** open streams' close functions: a stopping API ends them (the server's close waits for open connections) */
  const streams = new Set<(why: string) => void>();
  app.addHook("preClose", async () => {
    for (const close of [...streams]) close("the API is stopping");
  });
  app.get("/events", async (req: FastifyRequest<{ Querystring: { token?: string; salt_token?: string } }>, reply) => {
    const token = req.query.token || req.query.salt_token || sessionToken(req);
    const tok = token ? await netapi.getToken(token, origin(req)) : undefined;
    if (!token || !tok) throw new ApiError(401, "Invalid token");
    let started = false;
    let closed = false;
    const raw = reply.raw;
    const off = d.feed.subscribe((e) => {
      if (!started || closed) return;
      if (raw.writableLength > sseBacklogBytesMax) return close(`the client is ${raw.writableLength} bytes behind`);
      raw.write(`tag: ${e.tag.replace(/[\r\n]/g, " ")}\ndata: ${toJson({ tag: e.tag, data: e.data })}\n\n`);
    });
    try {
      await d.feed.ready();
    } catch (e) {
      off();
      throw e;
    }
    reply.hijack();
    raw.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "keep-alive", ...corsHeaders(req, opts) });
    raw.write("retry: 400\n\n");
    started = true;
    stats.sseClients++;
    const close = (why?: string) => {
      if (closed) return;
      closed = true;
      streams.delete(close);
      stats.sseClients--;
      off();
      clearInterval(recheck);
      if (why) log.info(`HTTP API event stream to ${source(req)} closed: ${why}`);
      raw.end();
    };
    const recheck = setInterval(() => {
      void netapi.getToken(token, origin(req)).then(
        (t) => (t ? void raw.write(": keep-alive\n\n") : close("the token is no longer valid")),
        () => undefined,
      );
    }, d.sseRecheckMs ?? sseRecheckMs);
    streams.add(close);
    req.raw.on("close", () => close());
  });

  // --- webhooks ---
  app.post(`${opts.webhookUrl}/*`, hook);
  app.post(opts.webhookUrl, hook);
  async function hook(req: FastifyRequest, reply: FastifyReply) {
    const rest = (req.params as { "*"?: string })["*"] ?? "";
    const segments = rest.split("/").filter((s) => s !== "");
    if (segments.length > hookSegmentsMax || !segments.every((s) => HOOK_SEGMENT_RE.test(s) && s !== "." && s !== "..")) {
      throw new ApiError(400, `Invalid hook tag: at most ${hookSegmentsMax} path segments of letters, digits and _ . : @ + = , ~ -`);
    }
    if (!opts.webhookDisableAuth) await requireValidSession(req);
    const tag = ["salt", "netapi", "hook", ...segments].join("/");
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (!HOOK_HEADERS_DROPPED.has(k) && v !== undefined) headers[k] = Array.isArray(v) ? v.join(", ") : v;
    headers["Remote-Addr"] = source(req);
    const post = req.body ?? {};
    const body = rawBodies.get(req) ?? "";
    d.fire(tag, { body, post, headers });
    return answer(req, reply, 200, { success: true });
  }

  // --- /stats ---
  app.get("/stats", async (req, reply) => {
    if (!opts.statsDisableAuth) await requireValidSession(req);
    return answer(req, reply, 200, {
      brine_api: {
        started: stats.started,
        uptime_s: Date.now() / 1000 - stats.started,
        requests: stats.requests,
        responses: stats.status,
        login_failures: stats.loginFailures,
        rate_limited: stats.rateLimited,
        event_streams: stats.sseClients,
        master_requests_in_flight: d.masterInFlight(),
      },
    });
  });

  return app;
}

/** Headers @fastify/cors would add, for the hijacked /events response. */
function corsHeaders(req: FastifyRequest, opts: ApiOptions): Record<string, string> {
  const origin = req.headers.origin;
  if (!origin || !opts.corsOrigins.length) return {};
  if (!opts.corsOrigins.includes("*") && !opts.corsOrigins.includes(origin)) return {};
  return { "Access-Control-Allow-Origin": origin, "Access-Control-Allow-Credentials": "true", Vary: "Origin" };
}
