/**
 * Reading a Salt master configuration directory: `<dir>/master` then `<dir>/master.d/*.conf` in name
 * order (later files override earlier keys), over Salt's defaults, then `root_dir` applied to paths.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parse } from "yaml";
import { BrineError } from "../errors.js";
import { ROOT_DIR_PATHS, masterDefaults, type MasterConfig } from "./defaults.js";

function readYamlMap(file: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new BrineError("CONFIG_INVALID", `${file}: ${(e as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) throw new BrineError("CONFIG_INVALID", `${file}: top level must be a mapping`);
  return doc as Record<string, unknown>;
}

/** Salt joins root_dir and an absolute path by concatenation unless the path already starts with it. */
export function prependRoot(root: string, p: string): string {
  if (root === "/" || root === "") return p;
  const absRoot = path.resolve(root);
  if (p.startsWith(absRoot)) return p;
  return path.join(absRoot, p);
}

export function loadMasterConfig(configDir: string, overrides: Partial<MasterConfig> = {}): MasterConfig {
  const file = path.join(configDir, "master");
  const merged: Record<string, unknown> = {};
  if (existsSync(file)) Object.assign(merged, readYamlMap(file));
  const includeDir = path.join(configDir, "master.d");
  if (existsSync(includeDir)) {
    for (const name of readdirSync(includeDir).filter((n) => n.endsWith(".conf")).sort()) {
      Object.assign(merged, readYamlMap(path.join(includeDir, name)));
    }
  }
  const cfg = { ...masterDefaults(), ...merged, ...overrides } as MasterConfig;
  cfg.conf_file = file;
  if (!cfg.id) cfg.id = `${os.hostname()}_master`;
  const root = String(cfg.root_dir ?? "/");
  // Relative root_dir is relative to the config directory's parent of parents, as with a packaged tree;
  // we resolve it against the current directory like Salt does.
  cfg.root_dir = path.resolve(root);
  for (const key of ROOT_DIR_PATHS) {
    const v = cfg[key];
    if (typeof v === "string" && v !== "") cfg[key] = prependRoot(cfg.root_dir, v) as never;
  }
  validate(cfg);
  return cfg;
}

function validate(cfg: MasterConfig): void {
  const port = (k: "publish_port" | "ret_port" | "cluster_pool_port") => {
    const v = Number(cfg[k]);
    if (!Number.isInteger(v) || v < 0 || v > 65535) throw new BrineError("CONFIG_INVALID", `${k} must be a port number`);
    cfg[k] = v;
  };
  port("publish_port");
  port("ret_port");
  port("cluster_pool_port");
  if (!Number.isInteger(cfg.worker_threads) || cfg.worker_threads < 1) {
    throw new BrineError("CONFIG_INVALID", "worker_threads must be a positive integer");
  }
  if (![1024, 2048, 3072, 4096].includes(Number(cfg.keysize))) throw new BrineError("CONFIG_INVALID", "keysize must be 1024-4096");
  if (!["PKCS1v15-SHA1", "PKCS1v15-SHA224"].includes(cfg.publish_signing_algorithm)) {
    throw new BrineError("CONFIG_INVALID", "publish_signing_algorithm must be PKCS1v15-SHA1 or PKCS1v15-SHA224");
  }
  if (cfg.cluster_port !== undefined && cfg.cluster_pool_port === 4520) cfg.cluster_pool_port = Number(cfg.cluster_port);
}

/** The embedded default used by `npm start`: everything under ./var, loopback only, auto_accept off. */
export function embeddedDefaultConfigText(varDir: string): string {
  return [
    "# brine embedded default configuration (written at first start; edit freely)",
    `root_dir: ${varDir}`,
    "interface: 127.0.0.1",
    "publish_port: 4505",
    "ret_port: 4506",
    "pki_dir: /pki/master",
    "cachedir: /cache",
    "sock_dir: /run",
    "log_file: /log/master",
    "log_level: info",
    "file_roots:",
    "  base:",
    `    - ${path.join(varDir, "srv", "salt")}`,
    "pillar_roots:",
    "  base:",
    `    - ${path.join(varDir, "srv", "pillar")}`,
    "",
  ].join("\n");
}
