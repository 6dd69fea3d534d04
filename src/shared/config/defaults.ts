import { optionDefault } from "./options.js";
import { MasterConfigSchema, type MasterConfigDeclared, type OptionName } from "./schema.js";

/**
 * A master configuration: every option declared in schema.ts (src/shared/config/schema.ts is the one declaration
 * of each option's type, bounds, default and doc), plus whatever else a file set (unknown options are
 * warned about at load and kept, as Salt keeps them).
 */
export type MasterConfig = MasterConfigDeclared & { [key: string]: unknown };

/**
 * The default of every declared option that has one (Salt's DEFAULT_MASTER_OPTS values where Salt has the
 * option). Paths are the system ones; `root_dir` prefixes them as Salt's apply_master_config does.
 */
export function masterDefaults(): MasterConfig {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(MasterConfigSchema.properties) as OptionName[]) {
    const d = optionDefault(name);
    if (d !== undefined) out[name] = d;
  }
  return out as MasterConfig;
}

/** Options whose values are paths that `root_dir` prefixes (Salt's prepend_root_dir list in master_config; not cluster_pki_dir, which Salt 3007 leaves as written). */
export const ROOT_DIR_PATHS = ["pki_dir", "cachedir", "sock_dir", "log_file", "autosign_file", "autoreject_file", "autosign_grains_dir"] as const;
