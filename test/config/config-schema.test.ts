/**
 * The schema is the one declaration of each option: defaults come from it, the readers take their bounds
 * from it, every option the code reads is declared in it, and docs/CONFIG.md is generated from it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { renderConfigDocs } from "../../src/shared/config/docs.js";
import { readOption, optionDefault } from "../../src/shared/config/options.js";
import { SALT_MASTER_OPTIONS } from "../../src/shared/config/salt-master-options.js";
import { MasterConfigSchema, isDeclaredOption } from "../../src/shared/config/schema.js";
import { closestOption } from "../../src/shared/config/load.js";
import { isBrineError } from "../../src/shared/errors.js";
import { repoRoot } from "../helpers/paths.js";

test("docs/CONFIG.md is what `npm run config:docs` generates from the schema (run it after changing an option)", () => {
  assert.equal(readFileSync(path.join(repoRoot, "docs", "CONFIG.md"), "utf8"), renderConfigDocs());
});

test("masterDefaults holds exactly the declared options that have a default", () => {
  const d = masterDefaults() as Record<string, unknown>;
  for (const k of Object.keys(d)) assert.ok(isDeclaredOption(k), `${k} is in masterDefaults but not declared`);
  for (const [k, s] of Object.entries(MasterConfigSchema.properties)) {
    if ((s as { default?: unknown }).default !== undefined) assert.deepEqual(d[k], (s as { default?: unknown }).default, k);
  }
});

test("readOption checks hand-built configurations too: a NaN lane bound cannot get through", () => {
  assert.throws(() => readOption({ brine_queue_len_max: "lots" }, "brine_queue_len_max"), (e) => isBrineError(e, "CONFIG_INVALID") && /: brine_queue_len_max: must be an integer from 1 to/.test((e as Error).message));
  assert.throws(() => readOption({ brine_auth_stale_ms: Number.NaN }, "brine_auth_stale_ms"), (e) => isBrineError(e, "CONFIG_INVALID") && /: brine_auth_stale_ms: must be/.test((e as Error).message));
  assert.equal(readOption({}, "brine_queue_len_max"), optionDefault("brine_queue_len_max"));
  assert.equal(readOption({ brine_queue_len_max: "12" }, "brine_queue_len_max"), 12);
});

test("Salt's master option list was generated from Salt's source and the schema marks brine's share of it", () => {
  for (const n of ["interface", "file_roots", "hgfs_remotes", "cluster_peers", "external_auth"]) assert.ok(SALT_MASTER_OPTIONS.includes(n), n);
  assert.ok(isDeclaredOption("file_roots") && isDeclaredOption("gitfs_remotes") && !isDeclaredOption("hgfs_remotes"));
});

test("did-you-mean finds close names only", () => {
  assert.equal(closestOption("publsh_port"), "publish_port");
  assert.equal(closestOption("brine_queue_len_mx"), "brine_queue_len_max");
  assert.equal(closestOption("completely_unrelated_thing"), undefined);
});

/** files whose `cfg` is not the master's configuration (the logger's, a test minion's, a Raft node's) */
const OTHER_CFG = [path.join("src", "shared", "log.ts"), path.join("src", "workers", "raft", "core") + path.sep, path.join("src", "lib", "minion") + path.sep];

/** `cfg.<name>`, `cfg?.<name>`, `cfg["<name>"]`, `(cfg as ...).<name>` and readOption(cfg, "<name>") in files that handle a configuration */
function optionsReadIn(dir: string, out = new Map<string, string>()): Map<string, string> {
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) optionsReadIn(p, out);
    else if (name.endsWith(".ts")) {
      const text = readFileSync(p, "utf8");
      if (!/Config\b/.test(text) || OTHER_CFG.some((o) => path.relative(repoRoot, p).startsWith(o))) continue;
      for (const m of text.matchAll(/\bcfg\??\.([a-z][a-z0-9_]*)\b|\bcfg\[\s*"([a-z][a-z0-9_.]*)"\s*\]/g)) out.set(m[1] ?? m[2]!, p);
      for (const m of text.matchAll(/readOption\(\s*\w+,\s*"([a-z0-9_.]+)"/g)) out.set(m[1]!, p);
      for (const m of text.matchAll(/\(\s*\w*cfg\s+as\s+[^()]*(?:<[^>]*>)?\s*\)\??\.([a-z][a-z0-9_]*)\b/gi)) out.set(m[1]!, p);
    }
  }
  return out;
}

test("every option the code reads from a MasterConfig is declared in the schema", () => {
  const undeclared = [...optionsReadIn(path.join(repoRoot, "src"))].filter(([k]) => !isDeclaredOption(k));
  assert.deepEqual(undeclared, []);
});
