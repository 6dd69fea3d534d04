/**
 * docs/CONFIG.md, generated from the schema (schema.ts): `npm run config:docs` writes it
 * (scripts/config-docs.mjs), and test/config/config-docs.test.ts fails when the file is stale.
 */
import type { TSchema } from "@sinclair/typebox";
import { describe } from "./options.js";
import { SALT_MASTER_OPTIONS, SALT_OTHER_OPTIONS } from "./salt-master-options.js";
import { ApiSectionSchema, FileEauthSchema, MasterConfigSchema, MetricsSectionSchema } from "./schema.js";

type Notes = { description?: string; default?: unknown; docDefault?: string; unit?: string; properties?: Record<string, TSchema> };

function cell(t: string): string {
  return t.replace(/\|/g, "\\|").replace(/\n/g, " ");
}

function defaultText(s: Notes): string {
  if (s.docDefault) return s.docDefault;
  if (s.default === undefined) return "(not set)";
  return `\`${JSON.stringify(s.default)}\``;
}

function rows(props: Record<string, TSchema>, prefix: string, origin: (name: string) => string): string[] {
  return Object.entries(props).map(([name, schema]) => {
    const s = schema as Notes;
    const type = describe(schema) + (s.unit ? ` (${s.unit})` : "");
    return `| \`${prefix}${name}\` | ${cell(type)} | ${cell(defaultText(s))} | ${origin(name)} | ${cell(s.description ?? "")} |`;
  });
}

/** Salt's names that DEFAULT_MASTER_OPTS does not list (read with opts.get in Salt, or from other configs) */
const NOT_IN_MASTER_OPTS: Record<string, string> = {
  rest_cherrypy: "salt-api",
  rest_timeout: "salt-api",
  netapi_enable_clients: "salt-api",
  token_file: "Salt (client)",
  cluster_port: "Salt 3008 (deprecated)",
  cluster_election_min: "Salt 3008",
  cluster_election_max: "Salt 3008",
  include: "Salt",
  autosign_file: "Salt",
  autoreject_file: "Salt",
  autosign_grains_dir: "Salt",
  presence_events: "Salt",
};

const HEAD = ["| option | type | default | from | meaning |", "|---|---|---|---|---|"];

export function renderConfigDocs(): string {
  const salt = new Set(SALT_MASTER_OPTIONS);
  const top = MasterConfigSchema.properties as Record<string, TSchema>;
  const originOf = (n: string) => {
    if (salt.has(n) || SALT_OTHER_OPTIONS.includes(n)) return "Salt";
    if (n.startsWith("auth.") || n === "sharedsecret") return "Salt (eauth)";
    return NOT_IN_MASTER_OPTS[n] ?? "brine";
  };
  const implemented = [...salt].filter((n) => Object.hasOwn(top, n)).length;
  return [
    "# brine configuration options",
    "",
    "<!-- Generated from src/shared/config/schema.ts by `npm run config:docs`; do not edit by hand. -->",
    "",
    "brine reads a Salt master configuration directory as Salt does: `master`, then the files matched by",
    "`default_include` (`master.d/*.conf`), then those matched by `include` (globs, relative to the directory of",
    "the file that names them; a pattern in `include` that matches nothing is warned about). Included files",
    "override the main file's keys; among included files mappings merge and lists are joined, as in Salt.",
    "",
    "Every option below is checked at start: a bad value stops the master with",
    "`CONFIG_INVALID <option>: must be <type>, got <value> (in <file>)`. Numbers may be written as numeric",
    "strings (`\"5\"`, as Salt's type check accepts) and strings as numbers (`id: 42`); booleans must be",
    "booleans (files are YAML 1.1 as for Salt's PyYAML: unquoted `yes`/`no`/`on`/`off` are booleans, a quoted",
    "`\"yes\"` is a string and refused). A key written with no value (`null`) is \"not set\": the default applies.",
    "",
    "An option that is not listed here is warned about once at start: a Salt master option as",
    "`brine does not implement <option>; it is ignored`, unless it is set to Salt's own default where that is a",
    "plain value (a number, string, boolean, null, or an empty list or map: a copied default file changes",
    "nothing, in Salt or in brine); any other name as `unknown option <option>` with the",
    "closest known name (`did you mean ...?`). Unknown options are kept in the configuration, as Salt keeps them.",
    "",
    `brine implements ${implemented} of Salt's ${salt.size} master options (src/shared/config/salt-master-options.ts, generated`,
    "by scripts/salt-master-options.py from Salt's DEFAULT_MASTER_OPTS).",
    "",
    "## Master options",
    "",
    ...HEAD,
    ...rows(top, "", originOf),
    "",
    "## HTTP API (`rest_cherrypy:` and `brine_api:`)",
    "",
    "salt-api's `rest_cherrypy:` section, or brine's `brine_api:` with the same keys (its entries win).",
    "",
    ...HEAD,
    ...rows(ApiSectionSchema.properties as Record<string, TSchema>, "", (n) => ((ApiSectionSchema.properties as Record<string, Notes>)[n]!.description ?? "").startsWith("brine") ? "brine" : "salt-api"),
    "",
    "## Metrics (`brine_metrics:`)",
    "",
    ...HEAD,
    ...rows(MetricsSectionSchema.properties as Record<string, TSchema>, "", () => "brine"),
    "",
    "## `file` eauth backend (`external_auth: file:`)",
    "",
    "Salt keeps these options inside `external_auth: file:` beside the users.",
    "",
    ...HEAD,
    ...rows(FileEauthSchema.properties as Record<string, TSchema>, "", () => "Salt (eauth)"),
    "",
  ].join("\n");
}
