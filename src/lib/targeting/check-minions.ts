/**
 * The master's side of targeting, Salt's `CkMinions.check_minions` (salt/utils/minions.py): which
 * accepted minions a job expects to hear from, and which listed ids are not accepted (`missing`).
 *
 * The answer is a best effort that errs towards too many minions: with `greedy` (the default), grain,
 * pillar and ipcidr targets count a minion with no cached data as a match, since it may well match.
 * A minion whose data is cached but lacks the grains or pillar asked about does not match.
 *
 * Nothing here throws: an invalid target, an unknown type or a failing data lookup gives no minions.
 */
import { compareIds } from "../../shared/protocol/ids.js";
import { evaluateCompoundSet, parseCompound, type CompoundNode, type CompoundTerm } from "./compound.js";
import { fnmatchToRegExp } from "./fnmatch.js";
import { ipcidrMatch, parseIpTarget } from "./ipcidr.js";
import { expandNodegroup, type NodegroupConfig } from "./nodegroups.js";
import { compilePcreTarget, pcreTest } from "./pcre.js";
import { DEFAULT_TARGET_DELIMITER, subdictMatch, type SubdictOptions } from "./subdict.js";

/** What the master has cached for one minion (`minions/<id>/data.p`). */
export interface MinionData {
  grains?: unknown;
  pillar?: unknown;
}

export interface TargetContext {
  /** accepted minion ids (`pki_dir/minions`), sorted, dotfiles excluded */
  acceptedIds: readonly string[];
  /** the cached data of one minion, or undefined when nothing is cached for it */
  minionData(id: string): MinionData | undefined;
  /** the master's `nodegroups` setting, for `nodegroup` targets and `N@` */
  nodegroups?: NodegroupConfig;
  /** count minions with no cached data as matching grain/pillar/ipcidr targets (default true) */
  greedy?: boolean;
}

export interface CheckMinionsOptions {
  /** key delimiter for grain and pillar targets (the publish load's `delimiter`, default `:`) */
  delimiter?: string;
}

export interface CheckMinionsResult {
  /** accepted minions the target selects, sorted */
  minions: string[];
  /** ids a list target names that are not accepted, sorted */
  missing: string[];
}

/** An invalid target found while evaluating; the whole check then selects nothing, as in Salt. Never leaves this module (not a BrineError). */
class InvalidTarget extends Error {}

type CachedKind = "grains" | "pillar";

const NOT_LOADED: unique symbol = Symbol("not loaded");

/**
 * The accepted ids as the contract has them (sorted in Salt's id order, each once, no dotfiles), enforced rather than
 * trusted: as given when they already are (the key store's listing: one pass, no copy, on every publish to a whole
 * fleet), else a sorted copy without duplicates and dotfiles.
 */
export function universe(ids: readonly string[]): readonly string[] {
  let ok = true;
  for (let i = 0; i < ids.length && ok; i++) {
    const id = ids[i];
    ok = typeof id === "string" && !id.startsWith(".") && (i === 0 || compareIds(ids[i - 1]!, id) < 0);
  }
  if (ok) return ids;
  return [...new Set(ids)].filter((id) => typeof id === "string" && !id.startsWith(".")).sort(compareIds);
}

/** One evaluation: the accepted ids as a universe, each minion's data looked up at most once. */
class MasterView {
  readonly ids: readonly string[];
  readonly greedy: boolean;
  readonly missing = new Set<string>();
  readonly #ctx: TargetContext;
  /** cached data by index into `ids`; `NOT_LOADED` until looked up */
  readonly #data: Array<MinionData | undefined | typeof NOT_LOADED>;
  /** the ids as a set, made when a list target first asks (a glob over a whole fleet never does) */
  #index: ReadonlySet<string> | undefined;

  constructor(ctx: TargetContext) {
    this.#ctx = ctx;
    this.greedy = ctx.greedy !== false;
    this.ids = universe(ctx.acceptedIds);
    this.#data = new Array<MinionData | undefined | typeof NOT_LOADED>(this.ids.length).fill(NOT_LOADED);
  }

  get size(): number {
    return this.ids.length;
  }

  /** The cached data of `ids[index]`, fetched from the context at most once per check. */
  data(index: number): MinionData | undefined {
    let data = this.#data[index];
    if (data === NOT_LOADED) {
      data = this.#ctx.minionData(this.ids[index]!) ?? undefined;
      this.#data[index] = data;
    }
    return data;
  }

  mask(predicate: (id: string, index: number) => boolean): Uint8Array {
    const out = new Uint8Array(this.ids.length);
    for (let i = 0; i < this.ids.length; i += 1) out[i] = predicate(this.ids[i]!, i) ? 1 : 0;
    return out;
  }

  glob(pattern: unknown): Uint8Array {
    if (typeof pattern !== "string") throw new InvalidTarget("glob target is not a string");
    const re = fnmatchToRegExp(pattern);
    return this.mask((id) => re.test(id));
  }

  pcre(pattern: unknown): Uint8Array {
    const re = typeof pattern === "string" ? compilePcreTarget(pattern) : null;
    if (re === null) throw new InvalidTarget("invalid regular expression");
    return this.mask((id) => pcreTest(re, id));
  }

  /** Listed accepted ids are selected; the others are reported missing unless `ignoreMissing`. */
  list(expr: unknown, ignoreMissing: boolean): Uint8Array {
    let names: string[];
    if (typeof expr === "string") names = expr.split(",").filter((n) => n !== "");
    else if (Array.isArray(expr)) names = expr.filter((n): n is string => typeof n === "string");
    else throw new InvalidTarget("list target is neither a string nor a list");
    const wanted = new Set(names);
    if (!ignoreMissing) {
      const index = (this.#index ??= new Set(this.ids));
      for (const n of wanted) if (!index.has(n)) this.missing.add(n);
    }
    return this.mask((id) => wanted.has(id));
  }

  /** grain/pillar targets: subdict match on the cached data; no cached data counts when greedy. */
  cached(expr: unknown, delimiter: string, kind: CachedKind, options: SubdictOptions): Uint8Array {
    if (typeof expr !== "string") throw new InvalidTarget(`${kind} target is not a string`);
    return this.mask((_, i) => {
      const data = this.data(i);
      if (data === undefined) return this.greedy;
      return subdictMatch(data[kind], expr, delimiter, options);
    });
  }

  ipcidr(expr: unknown): Uint8Array {
    const target = parseIpTarget(expr);
    if (target === null) return new Uint8Array(this.ids.length); // Salt: invalid target, no minions
    return this.mask((_, i) => {
      const data = this.data(i);
      if (data === undefined) return this.greedy;
      return ipcidrMatch(target, data.grains);
    });
  }

  all(): Uint8Array {
    return new Uint8Array(this.ids.length).fill(1);
  }

  /** One compound term as a set. `pillarExact` is `compound_pillar_exact`: I@/J@ compare exactly. */
  term(term: CompoundTerm, afterNot: boolean, pillarExact: boolean): Uint8Array {
    if (term.kind === "glob") return this.glob(term.pattern);
    const { engine, pattern, delimiter } = term;
    switch (engine) {
      case "G":
        return this.cached(pattern, delimiter, "grains", {});
      case "P":
        return this.cached(pattern, delimiter, "grains", { regex: true });
      case "I":
        return this.cached(pattern, delimiter, "pillar", pillarExact ? { exact: true } : {});
      case "J":
        return this.cached(pattern, delimiter, "pillar", pillarExact ? { exact: true } : { regex: true });
      case "L":
        // `not L@a,b` excludes ids; an id that is not accepted is then not "missing"
        return this.list(pattern, afterNot);
      case "E":
        return this.pcre(pattern);
      case "S":
        return this.ipcidr(pattern);
      case "R":
        // Salt's master has no range server in compound targets and treats R@ as every minion
        return this.all();
    }
  }

  compound(node: CompoundNode | null, pillarExact: boolean): Uint8Array {
    if (node === null) throw new InvalidTarget("invalid compound target");
    return evaluateCompoundSet(node, this.size, (term, afterNot) => this.term(term, afterNot, pillarExact));
  }

  result(mask: Uint8Array): CheckMinionsResult {
    return {
      minions: this.ids.filter((_, i) => mask[i] === 1),
      missing: [...this.missing].sort(),
    };
  }
}

const EMPTY = (): CheckMinionsResult => ({ minions: [], missing: [] });

function evaluate(view: MasterView, tgt: unknown, tgtType: string, ctx: TargetContext, delimiter: string): Uint8Array {
  switch (tgtType) {
    case "glob":
      return view.glob(tgt);
    case "pcre":
      return view.pcre(tgt);
    case "list":
      return view.list(tgt, false);
    case "grain":
      return view.cached(tgt, delimiter, "grains", {});
    case "grain_pcre":
      return view.cached(tgt, delimiter, "grains", { regex: true });
    case "pillar":
      return view.cached(tgt, delimiter, "pillar", {});
    case "pillar_pcre":
      return view.cached(tgt, delimiter, "pillar", { regex: true });
    case "pillar_exact":
      return view.cached(tgt, delimiter, "pillar", { exact: true });
    case "ipcidr":
      return view.ipcidr(tgt);
    case "compound":
      return view.compound(parseCompound(tgt, ctx.nodegroups), false);
    case "compound_pillar_exact":
      return view.compound(parseCompound(tgt, ctx.nodegroups), true);
    case "nodegroup": {
      const words = expandNodegroup(tgt, ctx.nodegroups);
      if (words === null) throw new InvalidTarget("unknown nodegroup");
      return view.compound(parseCompound(words, ctx.nodegroups), false);
    }
    default:
      throw new InvalidTarget(`unknown target type ${tgtType}`);
  }
}

/**
 * Which accepted minions `tgt` of type `tgtType` selects, and which listed ids are missing.
 * A `null`/`undefined` target is the empty string, as in Salt.
 */
export function checkMinions(
  tgt: unknown,
  tgtType: string = "glob",
  ctx: TargetContext,
  opts: CheckMinionsOptions = {},
): CheckMinionsResult {
  const delimiter = opts.delimiter ?? DEFAULT_TARGET_DELIMITER;
  if (typeof delimiter !== "string" || delimiter === "") return EMPTY();
  try {
    const view = new MasterView(ctx);
    const mask = evaluate(view, tgt ?? "", tgtType, ctx, delimiter);
    return view.result(mask);
  } catch {
    // InvalidTarget, or a failing minionData() lookup: Salt logs and expects no minions
    return EMPTY();
  }
}
