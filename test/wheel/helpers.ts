/** A temp master config (pki dir, cachedir, config dir salt-key reads) and a recording WheelContext. */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { stringify } from "yaml";
import { loadMasterConfig } from "../../src/shared/config/load.js";
import type { MasterConfig } from "../../src/shared/config/defaults.js";
import { generateRsaPem } from "../../src/lib/pki/master-keys.js";
import { KeyStore, type KeyState } from "../../src/lib/pki/key-store.js";
import type { WheelContext } from "../../src/lib/wheel/index.js";
import { minionPkiDir } from "../../src/shared/shared-fs.js";

export interface WheelBed {
  root: string;
  confDir: string;
  cfg: MasterConfig;
  /** where minion keys live for this config (cluster_pki_dir when clustered) */
  keys: KeyStore;
  ctx: WheelContext;
  notes: string[];
  fired: { tag: string; data: unknown }[];
  connected: string[];
  cleanup(): void;
}

const pubs: string[] = [];
/** Distinct RSA public keys (1024 bits: only their text matters here), made once per test process. */
export function pubKey(i: number): string {
  while (pubs.length <= i) pubs.push(generateRsaPem(1024).publicPem);
  return pubs[i];
}

/** `options` are master config options over the bed's own (a function gets the bed's root directory). */
export function makeBed(options: Record<string, unknown> | ((root: string) => Record<string, unknown>) = {}): WheelBed {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-wheel-"));
  const confDir = path.join(root, "etc");
  mkdirSync(confDir, { recursive: true });
  const conf = {
    id: "wheel-master",
    pki_dir: path.join(root, "pki"),
    cachedir: path.join(root, "cache"),
    sock_dir: path.join(root, "run"),
    log_file: path.join(root, "log", "master"),
    file_roots: { base: [path.join(root, "srv", "salt")] },
    ...(typeof options === "function" ? options(root) : options),
  };
  writeFileSync(path.join(confDir, "master"), stringify(conf));
  const cfg = loadMasterConfig(confDir);
  for (const d of [cfg.pki_dir, cfg.cachedir, path.join(cfg.cachedir, "sessions")]) mkdirSync(d, { recursive: true });
  const keys = new KeyStore(minionPkiDir(cfg));
  keys.ensureDirs();
  const notes: string[] = [];
  const fired: { tag: string; data: unknown }[] = [];
  const connected: string[] = [];
  const ctx: WheelContext = {
    cfg,
    note: (c) => notes.push(c),
    fire: (tag, data) => fired.push({ tag, data }),
    connectedIds: async () => [...connected],
    now: () => 1_700_000_000_000,
  };
  return { root, confDir, cfg, keys, ctx, notes, fired, connected, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/** Put minion keys in place: {accepted: ["a"], pending: [...]}; key i of the list gets pubKey(offset + i). */
export function seed(bed: WheelBed, byState: Partial<Record<KeyState, string[]>>): void {
  let i = 0;
  for (const [state, ids] of Object.entries(byState) as [KeyState, string[]][]) for (const id of ids) bed.keys.write(state, id, pubKey(i++ % 4));
}
