/**
 * YAML as Salt reads and writes it (salt/utils/yamlloader.py over PyYAML's YAML 1.1 SafeLoader,
 * salt/utils/yamldumper.py), on the `yaml` package:
 * - booleans are PyYAML's: yes/no/true/false/on/off in their three casings (not y/n);
 * - integers: decimal without leading zeros, 0b…, 0x…, sexagesimal; a leading-zero integer such as
 *   `0755` is read as the *decimal* 755 (Salt strips the zeros so file modes keep their digits); `08`
 *   stays a string as in PyYAML;
 * - floats need a dot (`1e3` is a string, `1.0e+3` a float), plus .inf/.nan;
 * - timestamps stay strings (Salt maps them to plain scalars); `<<` merge keys work;
 * - a repeated key is an error ("found conflicting ID"), as in Salt.
 * Errors are YamlError with the 1-based line of the problem (not a BrineError: the line goes into Salt's render error text).
 */
import { Document, isMap, isScalar, LineCounter, parseDocument, type ScalarTag, type Tags } from "yaml";

export class YamlError extends Error {
  constructor(
    message: string,
    readonly line: number | undefined,
  ) {
    super(message);
    this.name = "YamlError";
  }
}

/** Largest YAML text parsed (characters); a rendered pillar file larger than this is refused. */
export const yamlCharsMax = 16 * 1024 * 1024;
/** Alias expansions allowed per document (billion-laughs guard). */
export const yamlAliasesMax = 10_000;

const INT = "tag:yaml.org,2002:int";
const FLOAT = "tag:yaml.org,2002:float";
const BOOL = "tag:yaml.org,2002:bool";

const trueTag: ScalarTag = {
  identify: (v) => v === true,
  default: true,
  tag: BOOL,
  test: /^(?:yes|Yes|YES|true|True|TRUE|on|On|ON)$/,
  resolve: () => true,
};
const falseTag: ScalarTag = {
  identify: (v) => v === false,
  default: true,
  tag: BOOL,
  test: /^(?:no|No|NO|false|False|FALSE|off|Off|OFF)$/,
  resolve: () => false,
};
const isInt = (v: unknown) => typeof v === "bigint" || Number.isInteger(v);
function intValue(digits: string, radix: number, negative: boolean): number | bigint {
  const clean = digits.replace(/_/g, "") || "0";
  const n = parseInt(clean, radix);
  let v: number | bigint = n;
  if (!Number.isSafeInteger(n)) {
    const prefix = radix === 16 ? "0x" : radix === 2 ? "0b" : radix === 8 ? "0o" : "";
    v = BigInt(prefix + clean);
  }
  if (!negative) return v;
  return typeof v === "bigint" ? -v : -v;
}
const decTag: ScalarTag = {
  identify: isInt,
  default: true,
  tag: INT,
  test: /^[-+]?(?:0|[1-9][0-9_]*)$/,
  resolve: (s) => intValue(s.replace(/^[-+]/, ""), 10, s.startsWith("-")),
};
/** `0755` → 755 (Salt's construct_scalar strips the leading zeros before PyYAML sees them). */
const saltOctTag: ScalarTag = {
  identify: () => false,
  default: true,
  tag: INT,
  test: /^0[0-7_]+$/,
  resolve: (s) => intValue(s.replace(/^0+/, ""), 10, false),
};
/** A signed leading-zero integer keeps PyYAML's octal reading (Salt's stripping only applies unsigned). */
const signedOctTag: ScalarTag = {
  identify: () => false,
  default: true,
  tag: INT,
  test: /^[-+]0[0-7_]+$/,
  resolve: (s) => intValue(s.slice(2), 8, s.startsWith("-")),
};
const binTag: ScalarTag = {
  identify: () => false,
  default: true,
  tag: INT,
  test: /^[-+]?0b[0-1_]+$/,
  resolve: (s) => intValue(s.replace(/^[-+]?0b/, ""), 2, s.startsWith("-")),
};
const hexTag: ScalarTag = {
  identify: () => false,
  default: true,
  tag: INT,
  test: /^[-+]?0x[0-9a-fA-F_]+$/,
  resolve: (s) => intValue(s.replace(/^[-+]?0x/, ""), 16, s.startsWith("-")),
};
const floatTag: ScalarTag = {
  identify: (v) => typeof v === "number" && !Number.isInteger(v),
  default: true,
  tag: FLOAT,
  test: /^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?)$/,
  resolve: (s) => parseFloat(s.replace(/_/g, "")),
};

function saltTags(tags: Tags): Tags {
  const kept = tags.filter((t) => {
    const tag = (t as { tag?: string }).tag;
    const format = (t as { format?: string }).format;
    if (tag === BOOL || tag === "tag:yaml.org,2002:timestamp") return false;
    if (tag === INT && format !== "TIME") return false;
    if (tag === FLOAT && format !== "TIME" && !String((t as ScalarTag).test).includes("inf")) return false;
    return true;
  });
  return [trueTag, falseTag, saltOctTag, signedOctTag, binTag, hexTag, decTag, floatTag, ...kept];
}

function firstLine(lc: LineCounter, pos: number | undefined): number | undefined {
  return pos === undefined ? undefined : lc.linePos(pos).line;
}

function conflictingKey(doc: Document, lc: LineCounter): YamlError | null {
  // uniqueKeys reports only "Map keys must be unique"; find the key for Salt's wording
  let found: YamlError | null = null;
  const visit = (node: unknown): void => {
    if (found || !node || typeof node !== "object") return;
    if (isMap(node)) {
      const seen = new Set<unknown>();
      for (const pair of node.items) {
        const k = isScalar(pair.key) ? pair.key.value : pair.key;
        if (seen.has(k)) {
          const range = (pair.key as { range?: [number, number, number] } | null)?.range;
          found = new YamlError(`found conflicting ID '${String(k)}'`, firstLine(lc, range?.[0]));
          return;
        }
        seen.add(k);
        visit(pair.value);
      }
    } else if ((node as { items?: unknown[] }).items) {
      for (const it of (node as { items: unknown[] }).items) visit(it);
    }
  };
  visit(doc.contents);
  return found;
}

/** Parse Salt YAML; empty documents give null. */
export function loadYaml(text: string): unknown {
  if (text.length > yamlCharsMax) throw new YamlError(`YAML text exceeds yamlCharsMax (${yamlCharsMax} characters)`, undefined);
  const lc = new LineCounter();
  const doc = parseDocument(text, {
    version: "1.1",
    customTags: saltTags,
    merge: true,
    uniqueKeys: true,
    lineCounter: lc,
    prettyErrors: false,
    strict: false,
  });
  if (doc.errors.length) {
    const dup = doc.errors.find((e) => e.code === "DUPLICATE_KEY");
    if (dup) throw conflictingKey(doc, lc) ?? new YamlError("found conflicting ID", firstLine(lc, dup.pos[0]));
    const e = doc.errors[0]!;
    throw new YamlError(e.message.split("\n")[0]!, firstLine(lc, e.pos[0]));
  }
  try {
    return doc.toJS({ maxAliasCount: yamlAliasesMax });
  } catch (e) {
    throw new YamlError((e as Error).message, undefined);
  }
}

/**
 * Salt's `yaml` Jinja filter (`salt.utils.yaml.safe_dump(value, default_flow_style=flow)`, stripped,
 * with the end-of-document marker removed). Lines are never folded.
 */
export function dumpYaml(value: unknown, flow = true): string {
  const doc = new Document(value, { version: "1.1", customTags: saltTags });
  let s = doc.toString({
    collectionStyle: flow ? "flow" : "block",
    flowCollectionPadding: false,
    lineWidth: 0,
    indentSeq: false,
  });
  s = s.trim();
  if (s.endsWith("\n...")) s = s.slice(0, -4).trim();
  return s;
}
