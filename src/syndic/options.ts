/**
 * salt-syndic's settings, read from the lower master's configuration as Salt's syndic_config reads them: the
 * `syndic_*` options of the master file, the lower master's own ports, `cachedir`, `sock_dir` and root key,
 * and the syndic's identity (`id`, `pki_dir`) from a `minion` file in the same directory when there is one
 * (Salt's default: the minion's id and `pki_dir`), else the master's `id` and `<pki_dir>/../minion`.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { parse } from "yaml";
import type { MasterConfig } from "../shared/config/defaults.js";
import { BrineError } from "../shared/errors.js";
import { readOption } from "../shared/config/options.js";

export interface UpstreamAddress {
  /** as written in syndic_master: the name a publish's master_id must equal to route returns to it */
  name: string;
  host: string;
  port: number;
}

export interface SyndicOptions {
  id: string;
  pkiDir: string;
  upstreams: UpstreamAddress[];
  failover: "random" | "ordered";
  mode: "sync" | "cluster";
  forwardEveryMs: number;
  jidForwardCacheHwm: number;
  queueMax: number;
  queueDir: string;
  finger?: string;
  /** master_id of the lower master (cluster mode: its own jobs' returns are not sent up) */
  masterId?: string;
}

function parseAddress(s: string, defaultPort: number): UpstreamAddress {
  const t = s.trim();
  // [v6]:port, host:port, or a bare host / v6 address
  const bracket = /^\[([^\]]+)\](?::(\d+))?$/.exec(t);
  if (bracket) return { name: t, host: bracket[1]!, port: bracket[2] ? Number(bracket[2]) : defaultPort };
  const hp = /^([^:]+):(\d+)$/.exec(t);
  if (hp) return { name: t, host: hp[1]!, port: Number(hp[2]) };
  if (!t) throw new BrineError("SYNDIC_CONFIG", "syndic_master holds an empty name");
  return { name: t, host: t, port: defaultPort };
}

function minionFile(configDir: string | undefined): Record<string, unknown> {
  if (!configDir) return {};
  const f = path.join(configDir, "minion");
  if (!existsSync(f)) return {};
  const v = parse(readFileSync(f, "utf8")) as unknown;
  return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

export function syndicOptions(cfg: MasterConfig, configDir?: string): SyndicOptions {
  const minion = minionFile(configDir);
  const id = typeof minion.id === "string" && minion.id ? minion.id : cfg.id;
  if (typeof id !== "string" || !id) throw new BrineError("SYNDIC_CONFIG", "the syndic has no id: set id in the minion file beside the master's, or the master's id");
  const pkiDir = typeof minion.pki_dir === "string" && minion.pki_dir ? minion.pki_dir : path.join(path.dirname(cfg.pki_dir), "minion");
  const port = readOption(cfg, "syndic_master_port") ?? 4506;
  const raw = readOption(cfg, "syndic_master");
  const list = (Array.isArray(raw) ? raw : [raw]).map((s) => parseAddress(s, port));
  const masterId = (cfg as Record<string, unknown>).master_id;
  const finger = readOption(cfg, "syndic_finger");
  return {
    id,
    pkiDir,
    upstreams: list,
    failover: readOption(cfg, "syndic_failover") as SyndicOptions["failover"],
    mode: readOption(cfg, "syndic_mode") as SyndicOptions["mode"],
    forwardEveryMs: readOption(cfg, "syndic_event_forward_timeout") * 1000,
    jidForwardCacheHwm: readOption(cfg, "syndic_jid_forward_cache_hwm"),
    queueMax: readOption(cfg, "brine_syndic_queue_max"),
    queueDir: path.join(cfg.cachedir, "syndic-queue"),
    finger: finger ? finger : undefined,
    masterId: typeof masterId === "string" && masterId ? masterId : undefined,
  };
}
