/**
 * Autosign and autoreject decisions (Salt's AutoKey): auto_accept, autosign_file / autoreject_file
 * (lines are fnmatch globs or \A…\Z regexes; `#` lines ignored; the file must not be world-writable,
 * nor group-writable without permissive_pki_access), one-shot `minions_autosign/<id>` stubs younger
 * than autosign_timeout minutes, and autosign_grains_dir/<grain> lines equal to the grain's value.
 */
import { existsSync, readFileSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { getLogger } from "../../shared/log.js";
import type { KeyStore } from "./key-store.js";
import { fnmatchToRegExp as fnmatchRegex } from "../targeting/index.js";

const log = getLogger("brine.autosign");

export interface AutosignConfig {
  auto_accept: boolean;
  autosign_file: string | null;
  autoreject_file: string | null;
  autosign_grains_dir: string | null;
  autosign_timeout: number;
  permissive_pki_access: boolean;
}

function fileIsSafe(file: string, permissive: boolean): boolean {
  try {
    const st = statSync(file);
    if (st.mode & 0o002) return false;
    if (st.mode & 0o020 && !permissive) return false;
    return true;
  } catch {
    return false;
  }
}

function idMatchesFile(id: string, file: string | null, permissive: boolean): boolean {
  if (!file || !existsSync(file)) return false;
  if (!fileIsSafe(file, permissive)) {
    log.warning(`${file} is writable by others; ignoring it`);
    return false;
  }
  for (const raw of readFileSync(file, "utf8").split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    if (fnmatchRegex(line).test(id)) return true;
    try {
      if (new RegExp(`^(?:${line})$`).test(id)) return true;
    } catch {
      // not a valid regex: the glob test above was the only one that applies
    }
  }
  return false;
}

export function checkAutoreject(cfg: AutosignConfig, id: string): boolean {
  return idMatchesFile(id, cfg.autoreject_file, cfg.permissive_pki_access);
}

export function checkAutosign(
  cfg: AutosignConfig,
  store: KeyStore,
  id: string,
  grains: Record<string, unknown> | undefined,
  nowMs: number,
): boolean {
  if (cfg.auto_accept) return true;
  if (idMatchesFile(id, cfg.autosign_file, cfg.permissive_pki_access)) return true;
  const stub = store.autosignStub(id);
  if (existsSync(stub)) {
    const fresh = nowMs - statSync(stub).mtimeMs < cfg.autosign_timeout * 60_000;
    rmSync(stub, { force: true }); // one-shot: consumed on use, purged when stale
    if (fresh) return true;
  }
  if (cfg.autosign_grains_dir && grains) {
    for (const [grain, value] of Object.entries(grains)) {
      if (!/^[A-Za-z0-9_.-]+$/.test(grain)) continue;
      const f = path.join(cfg.autosign_grains_dir, grain);
      if (!existsSync(f)) continue;
      const lines = readFileSync(f, "utf8").split("\n").map((l) => l.trim());
      if (lines.some((l) => l && !l.startsWith("#") && l === String(value))) return true;
    }
  }
  return false;
}
