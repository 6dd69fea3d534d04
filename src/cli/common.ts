/** Pieces shared by brine's Salt-compatible command lines. */
import { loadMasterConfig } from "../config/load.js";
import type { MasterConfig } from "../config/defaults.js";
import { configureLogging } from "../log.js";
import { isBrineError } from "../errors.js";

export const DEFAULT_CONFIG_DIR = "/etc/salt";

export function loadConfigOrExit(dir: string, overrides: Partial<MasterConfig> = {}): MasterConfig {
  try {
    return loadMasterConfig(dir, overrides);
  } catch (e) {
    process.stderr.write(`Error: ${isBrineError(e) ? e.message : (e as Error).message}\n`);
    process.exit(2);
  }
}

export function setupCliLogging(level: string | undefined): void {
  configureLogging({ level: level ?? "warning" });
}

/** Values of string options that may repeat or be comma-separated. */
export function exitWith(code: number): never {
  process.exit(code);
}
