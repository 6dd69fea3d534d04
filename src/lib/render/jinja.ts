/**
 * Jinja rendering for Salt templates on nunjucks (see docs/DEPENDENCIES-fileserver.md for the choice
 * and the list of differences).
 *
 * What makes nunjucks behave like Salt's Jinja (salt/utils/templates.py: render_jinja_tmpl):
 * - Python values: `{{ none }}` prints `None`, booleans `True`/`False`, lists and dicts their Python
 *   repr; `True`/`False`/`None` literals; Python slices; Python methods on str/list/dict (pymethods.ts);
 * - StrictUndefined (Salt's default): printing an undefined value, or looking up an attribute of one,
 *   is an error naming the variable and line (`is defined`, `default`, `.get()` still work);
 * - the sandbox: lookups reach own data properties and the Python method tables only, never JS
 *   prototypes (`constructor`, `__proto__`), so a template cannot reach Function;
 * - Salt's extensions: `{% do %}`, `{% import_yaml/json/text "f" as v %}`, `{% load_yaml/json/text
 *   as v %}…{% endload %}`; Salt's filters and tests (filters.ts); globals `raise`, `dict`, `odict`,
 *   `namespace`; the template context as globals (so imported macros see `grains`, `pillar`…);
 * - `jinja_env`/`jinja_sls_env` `trim_blocks`/`lstrip_blocks`.
 * Compiled templates are cached per worker thread by path + stat signature (`templateCacheEntriesMax`).
 */
import path from "node:path";
import nunjucksDefault from "nunjucks";
import { getLogger } from "../../shared/log.js";
import { isDict } from "../pillar/merge.js";
import { kwargsOf } from "./args.js";
import { FilterError, makeFilters, makeTests } from "./filters.js";
import { pyStr } from "./pyrepr.js";
import { RenderError } from "./render-error.js";
import { TemplateRaise, memberLookup, suppressValue, ensureDefined, pyIter, pyCompare, pyAdd, pyMul, pyMod, pySetAttr, pyIn } from "./py-ops.js";
import { loadYaml, YamlError } from "./yaml.js";

const log = getLogger("brine.render");

/* eslint-disable @typescript-eslint/no-explicit-any */
type Any = any;
const nj = nunjucksDefault as Any;
const runtime = nj.runtime as Any;
const nodes = nj.nodes as Any;

/** Compiled templates kept per worker thread (entries). */
export const templateCacheEntriesMax = 2048;
/** Largest template source compiled (characters). */
export const templateCharsMax = 4 * 1024 * 1024;

/** One template source found by a loader. `sig` changes whenever the file does. */
export interface JinjaSource {
  /** the template text (read only when the compiled template is not cached) */
  read(): string;
  /** the file's path, for messages */
  path: string;
  sig: string;
}
/** Find a template by its root-relative name (already normalised); null when missing. */
export type SourceLoader = (name: string) => JinjaSource | null;

export interface JinjaOptions {
  trimBlocks?: boolean;
  lstripBlocks?: boolean;
}

function patchLexer(): void {
  const lexer = nj.lexer as Any;
  const proto = Object.getPrototypeOf(lexer.lex("", {}));
  const orig = proto.nextToken;
  proto.nextToken = function nextToken(this: Any) {
    if (this.in_code && this.brineDepth > 0 && this.str.startsWith("}}", this.index)) {
      const tok = { type: lexer.TOKEN_RIGHT_CURLY, value: "}", lineno: this.lineno, colno: this.colno };
      this.forward();
      this.brineDepth -= 1;
      return tok;
    }
    const tok = orig.call(this);
    if (tok) {
      if (tok.type === lexer.TOKEN_LEFT_CURLY) this.brineDepth = (this.brineDepth ?? 0) + 1;
      else if (tok.type === lexer.TOKEN_RIGHT_CURLY) this.brineDepth = Math.max(0, (this.brineDepth ?? 0) - 1);
      else if (tok.type === lexer.TOKEN_BLOCK_END || tok.type === lexer.TOKEN_VARIABLE_END) this.brineDepth = 0;
    }
    return tok;
  };
}

/** Statement nodes before which the compiled code records its line (for runtime error messages). */
const STATEMENTS = new Set(["Output", "If", "For", "Set", "Import", "FromImport", "Include", "Switch", "Extends"]);

let installed = false;
function installPythonRuntime(): void {
  if (installed) return;
  installed = true;
  nj.installJinjaCompat(); // True/False/None literals and slice syntax in the parser
  runtime.memberLookup = memberLookup;
  runtime.suppressValue = suppressValue;
  runtime.ensureDefined = ensureDefined;
  runtime.brinePyIter = pyIter;
  runtime.brineCompare = pyCompare;
  runtime.brineAdd = pyAdd;
  runtime.brineMul = pyMul;
  runtime.brineMod = pyMod;
  runtime.brineCycle = (i: number) => (...args: unknown[]) => args[i % args.length];
  runtime.inOperator = pyIn;
  patchLexer();
  const Compiler = nj.compiler.Compiler;
  const origCompile = Compiler.prototype.compile;
  Compiler.prototype.compile = function compile(this: Any, node: Any, frame: Any) {
    if (node && STATEMENTS.has(node.typename) && typeof node.lineno === "number") {
      this._emitLine(`lineno = ${node.lineno}; colno = ${node.colno};`);
    }
    return origCompile.call(this, node, frame);
  };
  const binary = (fn: string) =>
    function (this: Any, node: Any, frame: Any) {
      this._emit(`runtime.${fn}(`);
      this.compile(node.left, frame);
      this._emit(", ");
      this.compile(node.right, frame);
      this._emit(")");
    };
  Compiler.prototype.compileAdd = binary("brineAdd");
  // a parenthesised list of several values is a tuple (a list here), not JS's comma operator
  const origGroup = Compiler.prototype.compileGroup;
  Compiler.prototype.compileGroup = function (this: Any, node: Any, frame: Any) {
    if (node.children.length > 1) return this._compileAggregate(node, frame, "[", "]");
    return origGroup.call(this, node, frame);
  };
  Compiler.prototype.compileMul = binary("brineMul");
  Compiler.prototype.compileMod = binary("brineMod");
  // loop.cycle(...)
  const origBindings = Compiler.prototype._emitLoopBindings;
  Compiler.prototype._emitLoopBindings = function (this: Any, node: Any, arr: string, i: string, len: string) {
    origBindings.call(this, node, arr, i, len);
    this._emitLine(`frame.set("loop.cycle", runtime.brineCycle(${i}));`);
  };
  // {% break %} / {% continue %} (Jinja's loopcontrols, enabled by Salt) compile to JS statements
  Compiler.prototype.compileBrineLoopControl = function (this: Any, node: Any) {
    this._emitLine(`${node.kind === "break" ? "break" : "continue"};`);
  };
  // {% set ns.attr = value %}
  const Parser = nj.parser.Parser;
  const origParseSet = Parser.prototype.parseSet;
  Parser.prototype.parseSet = function parseSet(this: Any) {
    const tag = this.peekToken();
    if (tag.value !== "set") return origParseSet.call(this);
    const lexer = nj.lexer as Any;
    // look ahead: `set NAME . NAME =`
    const t = this.tokens;
    const save = { index: t.index, lineno: t.lineno, colno: t.colno, in_code: t.in_code, brineDepth: t.brineDepth, peeked: this.peeked, breakOnBlocks: this.breakOnBlocks, dropLeadingWhitespace: this.dropLeadingWhitespace };
    this.nextToken();
    const t1 = this.nextToken();
    const t2 = this.nextToken();
    if (t1?.type === lexer.TOKEN_SYMBOL && t2?.type === lexer.TOKEN_OPERATOR && t2.value === ".") {
      const attr = this.nextToken();
      if (attr?.type === lexer.TOKEN_SYMBOL && this.skipValue(lexer.TOKEN_OPERATOR, "=")) {
        const value = this.parseExpression();
        this.advanceAfterBlockEnd(tag.value);
        const fn = new nodes.Symbol(tag.lineno, tag.colno, "__py_setattr");
        const args = new nodes.NodeList(tag.lineno, tag.colno, [new nodes.Symbol(t1.lineno, t1.colno, t1.value), new nodes.Literal(attr.lineno, attr.colno, attr.value), value]);
        return new nodes.Output(tag.lineno, tag.colno, [new nodes.FunCall(tag.lineno, tag.colno, fn, args)]);
      }
    }
    Object.assign(t, { index: save.index, lineno: save.lineno, colno: save.colno, in_code: save.in_code, brineDepth: save.brineDepth });
    this.peeked = save.peeked;
    this.breakOnBlocks = save.breakOnBlocks;
    this.dropLeadingWhitespace = save.dropLeadingWhitespace;
    return origParseSet.call(this);
  };
  Compiler.prototype.compileCompare = function compileCompare(this: Any, node: Any, frame: Any) {
    this._emit("runtime.brineCompare([");
    this.compile(node.expr, frame);
    for (const op of node.ops) {
      this._emit(",");
      this.compile(op.expr, frame);
    }
    this._emit(`], ${JSON.stringify(node.ops.map((o: Any) => o.type))})`);
  };
  // `for x in dict` iterates the keys, as in Jinja
  const origFor = Compiler.prototype.compileFor;
  Compiler.prototype.compileFor = function compileFor(this: Any, node: Any, frame: Any) {
    if (!(node.name instanceof nodes.Array) && !node.brinePy) {
      node.brinePy = true;
      node.arr = new nodes.FunCall(node.lineno, node.colno, new nodes.Symbol(node.lineno, node.colno, "__py_iter"), new nodes.NodeList(node.lineno, node.colno, [node.arr]));
    }
    // Jinja scoping: a {% set %} inside a loop never writes to a variable outside it (that is what
    // namespace() is for); nunjucks would write through, so the loop frame isolates writes
    const emitLine = this._emitLine;
    let first = true;
    this._emitLine = function (this: Any, code: string) {
      if (first && code === "frame = frame.push();") {
        first = false;
        return emitLine.call(this, "frame = frame.push(true);");
      }
      return emitLine.call(this, code);
    };
    try {
      return origFor.call(this, node, frame);
    } finally {
      this._emitLine = emitLine;
    }
  };
  // name the variable in "is undefined" errors
  const origOutput = Compiler.prototype.compileOutput;
  Compiler.prototype.compileOutput = function compileOutput(this: Any, node: Any, frame: Any) {
    if (!this.throwOnUndefined) return origOutput.call(this, node, frame);
    for (const child of node.children) {
      if (child instanceof nodes.TemplateData) {
        if (child.value) {
          this._emit(`${this.buffer} += `);
          this.compileLiteral(child, frame);
          this._emitLine(";");
        }
      } else {
        this._emit(`${this.buffer} += runtime.suppressValue(runtime.ensureDefined(`);
        this.compile(child, frame);
        const name = JSON.stringify(this._getNodeName(child));
        this._emit(`,${child.lineno},${child.colno},${name}), env.opts.autoescape);\n`);
      }
    }
  };
}

// ---------------------------------------------------------------------------------------------------
// Salt's tag extensions

function symbol(tok: Any, name: string) {
  return new nodes.Symbol(tok.lineno, tok.colno, name);
}
function call(tok: Any, fn: string, args: Any[]) {
  return new nodes.FunCall(tok.lineno, tok.colno, symbol(tok, fn), new nodes.NodeList(tok.lineno, tok.colno, args));
}
function setNode(tok: Any, target: Any, value: Any) {
  const s = new nodes.Set(tok.lineno, tok.colno, [target]);
  s.value = value;
  return s;
}

const DoExtension = {
  tags: ["do"],
  parse(parser: Any) {
    const tok = parser.nextToken();
    const expr = parser.parseExpression();
    parser.advanceAfterBlockEnd(tok.value);
    return new nodes.Output(tok.lineno, tok.colno, [call(tok, "__salt_do", [expr])]);
  },
};

const ImportExtension = {
  tags: ["import_yaml", "import_json", "import_text"],
  parse(parser: Any) {
    const tok = parser.nextToken();
    const kind = String(tok.value).slice("import_".length);
    const name = parser.parseExpression();
    if (!parser.skipSymbol("as")) parser.fail(`${tok.value}: expected "as"`, tok.lineno, tok.colno);
    const target = parser.parsePrimary();
    parser.parseWithContext?.();
    parser.advanceAfterBlockEnd(tok.value);
    return setNode(tok, target, call(tok, "__salt_import", [new nodes.Literal(tok.lineno, tok.colno, kind), name]));
  },
};

const LoadExtension = {
  tags: ["load_yaml", "load_json", "load_text"],
  parse(parser: Any) {
    const tok = parser.nextToken();
    const kind = String(tok.value).slice("load_".length);
    if (!parser.skipSymbol("as")) parser.fail(`${tok.value}: expected "as"`, tok.lineno, tok.colno);
    const target = parser.parsePrimary();
    parser.advanceAfterBlockEnd(tok.value);
    const body = parser.parseUntilBlocks("endload");
    parser.advanceAfterBlockEnd();
    const capture = new nodes.Capture(tok.lineno, tok.colno, body);
    return setNode(tok, target, call(tok, "__salt_load", [new nodes.Literal(tok.lineno, tok.colno, kind), capture]));
  },
};

let LoopControl: Any;
const LoopControlExtension = {
  tags: ["break", "continue"],
  parse(parser: Any) {
    const tok = parser.nextToken();
    parser.advanceAfterBlockEnd(tok.value);
    LoopControl ??= nodes.Node.extend("BrineLoopControl", { fields: ["kind"] });
    return new LoopControl(tok.lineno, tok.colno, tok.value);
  },
};

/** `{% with a = 1, b = 2 %}…{% endwith %}`: a scope, compiled as a one-pass loop with the assignments first. */
const WithExtension = {
  tags: ["with"],
  parse(parser: Any) {
    const tok = parser.nextToken();
    const sets: Any[] = [];
    const lexer = nj.lexer as Any;
    while (!parser.skip(lexer.TOKEN_BLOCK_END)) {
      const target = parser.parsePrimary();
      if (!parser.skipValue(lexer.TOKEN_OPERATOR, "=")) parser.fail("with: expected =", tok.lineno, tok.colno);
      sets.push(setNode(tok, target, parser.parseExpression()));
      parser.skip(lexer.TOKEN_COMMA);
    }
    const body = parser.parseUntilBlocks("endwith");
    parser.advanceAfterBlockEnd();
    const once = new nodes.Array(tok.lineno, tok.colno, [new nodes.Literal(tok.lineno, tok.colno, 0)]);
    return new nodes.For(tok.lineno, tok.colno, once, symbol(tok, "__with"), new nodes.NodeList(tok.lineno, tok.colno, [...sets, ...body.children]), null);
  },
};

function deserialize(kind: string, text: string, where: string): unknown {
  try {
    if (kind === "yaml") return loadYaml(text) ?? {};
    if (kind === "json") return JSON.parse(text);
    return text;
  } catch (e) {
    const line = e instanceof YamlError && e.line ? ` (line ${e.line})` : "";
    throw new FilterError(`cannot load ${kind} from ${where}${line}: ${(e as Error).message}`);
  }
}

// ---------------------------------------------------------------------------------------------------
// compiled template cache (per thread)

const compiled = new Map<string, Any>();
function compiledProps(env: Any, s: JinjaSource, optsKey: string): Any {
  const key = `${s.path}\0${s.sig}\0${optsKey}`;
  const hit = compiled.get(key);
  if (hit) {
    compiled.delete(key);
    compiled.set(key, hit);
    return hit;
  }
  const src = s.read();
  if (src.length > templateCharsMax) throw new FilterError(`${s.path} exceeds templateCharsMax (${templateCharsMax} characters)`);
  let code: string;
  try {
    code = nj.compiler.compile(src, env.asyncFilters, env.extensionsList, s.path, env.opts);
  } catch (e) {
    if (e && typeof e === "object") Object.assign(e, { brineParse: true, brineFile: s.path, brineSrc: src });
    throw e;
  }
  const props = new Function(code)(); // eslint-disable-line no-new-func
  compiled.set(key, props);
  while (compiled.size > templateCacheEntriesMax) compiled.delete(compiled.keys().next().value!);
  return props;
}

/** Context lines around `line` (1-based) with Salt's marker, as SaltRenderError prints them. */
export function sourceContext(src: string, line: number | undefined): string {
  if (!line) return "";
  const lines = src.split("\n");
  const from = Math.max(0, line - 4);
  const to = Math.min(lines.length, line + 3);
  const out: string[] = [];
  for (let i = from; i < to; i++) out.push(i === line - 1 ? `${lines[i]}    <======================` : lines[i]!);
  return out.join("\n");
}

const BASE_KEYS = new Set(["__salt_do", "__py_iter", "__py_setattr", "__salt_import", "__salt_load", "raise", "dict", "odict", "namespace", "show_full_context", "range", "cycler", "joiner"]);

export class JinjaEnv {
  private readonly env: Any;
  private readonly optsKey: string;
  private readonly sources = new Map<string, JinjaSource>();

  constructor(
    private readonly load: SourceLoader,
    o: JinjaOptions = {},
  ) {
    installPythonRuntime();
    const self = this;
    const loader = {
      cache: {},
      getSource(name: string) {
        const s = self.loadCached(name);
        if (!s) return null;
        return { src: { type: "code", obj: compiledProps(self.env, s, self.optsKey) }, path: s.path, noCache: true };
      },
      isRelative: (name: string) => name.startsWith("./") || name.startsWith("../"),
      resolve: (parent: string, name: string) => path.posix.normalize(path.posix.join(path.posix.dirname(parent), name)),
    };
    this.env = new nj.Environment([loader], {
      autoescape: false,
      throwOnUndefined: true,
      trimBlocks: Boolean(o.trimBlocks),
      lstripBlocks: Boolean(o.lstripBlocks),
      dev: true,
    });
    this.optsKey = `${Boolean(o.trimBlocks)}:${Boolean(o.lstripBlocks)}`;
    const tests = makeTests();
    const filters = makeFilters({ ...this.builtinTests(), ...tests });
    for (const [n, f] of Object.entries(filters)) this.env.addFilter(n, f);
    for (const [n, t] of Object.entries(tests)) this.env.addTest(n, t);
    this.env.addExtension("SaltDo", DoExtension);
    this.env.addExtension("SaltImport", ImportExtension);
    this.env.addExtension("SaltLoad", LoadExtension);
    this.env.addExtension("LoopControls", LoopControlExtension);
    this.env.addExtension("With", WithExtension);
    this.env.addGlobal("__salt_do", () => "");
    this.env.addGlobal("__py_iter", pyIter);
    this.env.addGlobal("__py_setattr", pySetAttr);
    this.env.addGlobal("__salt_import", function (this: Any, kind: string, name: unknown) {
      return self.importFile(this, kind, name);
    });
    this.env.addGlobal("__salt_load", (kind: string, text: unknown) => deserialize(kind, String(text), "a load block"));
    this.env.addGlobal("raise", (msg: unknown) => {
      throw new TemplateRaise(pyStr(msg));
    });
    const dict = (...args: unknown[]) => {
      const { args: pos, kwargs } = kwargsOf(args);
      const out: Record<string, unknown> = {};
      for (const p of pos) {
        if (isDict(p)) Object.assign(out, p);
        else if (Array.isArray(p)) for (const kv of p) if (Array.isArray(kv) && kv.length === 2) out[String(kv[0])] = kv[1];
      }
      return Object.assign(out, kwargs);
    };
    this.env.addGlobal("dict", dict);
    this.env.addGlobal("odict", dict);
    this.env.addGlobal("namespace", dict);
    this.env.addGlobal("show_full_context", function (this: Any) {
      return this.getVariables?.() ?? {};
    });
  }

  private builtinTests(): Record<string, (...a: Any[]) => unknown> {
    return { ...(this.env.tests as Record<string, (...a: Any[]) => unknown>) };
  }

  /** Sources seen during the current render (for error context). */
  private loadCached(name: string): JinjaSource | null {
    const s = this.load(name);
    if (s) this.sources.set(s.path, s);
    return s;
  }

  private importFile(context: Any, kind: string, rawName: unknown): unknown {
    let name = String(rawName);
    if (name.startsWith("./") || name.startsWith("../")) {
      const dir = typeof context.ctx?.tpldir === "string" && context.ctx.tpldir !== "." ? context.ctx.tpldir : "";
      name = path.posix.normalize(path.posix.join(dir, name));
    }
    const tmpl = this.env.getTemplate(name, false, null, false);
    const text = tmpl.render(context.getVariables ? context.getVariables() : {});
    return deserialize(kind, text, name);
  }

  /**
   * Render the template `name` (found through the loader) with `context`; the context is also
   * installed as globals for the duration (Salt puts it in `jinja_env.globals`).
   */
  render(name: string, context: Record<string, unknown>): string {
    return this.withGlobals(context, () => {
      const tmpl = this.env.getTemplate(name, false, null, false);
      return tmpl.render(context);
    }, name);
  }

  /** Render template text that is not a file (a later stage of a render pipe). */
  renderString(src: string, file: string, context: Record<string, unknown>): string {
    const s: JinjaSource = { read: () => src, path: file, sig: `string:${src.length}:${hashCode(src)}` };
    this.sources.set(file, s);
    return this.withGlobals(context, () => {
      const tmpl = new nj.Template({ type: "code", obj: compiledProps(this.env, s, this.optsKey) }, this.env, file);
      return tmpl.render(context);
    }, file);
  }

  private withGlobals(context: Record<string, unknown>, fn: () => string, name: string): string {
    const g = this.env.globals as Record<string, unknown>;
    const added: string[] = [];
    for (const [k, v] of Object.entries(context)) {
      if (BASE_KEYS.has(k)) continue;
      g[k] = v;
      added.push(k);
    }
    this.sources.clear();
    try {
      return fn();
    } catch (e) {
      throw this.renderError(e, name);
    } finally {
      for (const k of added) delete g[k];
    }
  }

  private renderError(e: unknown, name: string): RenderError {
    const err = (e ?? {}) as { message?: string; lineno?: number; brineUndefined?: boolean; brineParse?: boolean; brineFile?: string; brineSrc?: string };
    const raw = String(err.message ?? e);
    // nunjucks prefixes "(path) [Line n, Column m]\n  "; keep the reason only
    const m = /^\((.*?)\)(?: \[Line (\d+), Column (\d+)\])?\n {2}([\s\S]*)$/.exec(raw);
    const file = err.brineFile ?? (m?.[1] && m[1] !== "unknown path" ? m[1] : name);
    let reason = m?.[4] ?? raw;
    // runtime lines are 0-based in the compiled code, parse errors are 1-based
    const line = typeof err.lineno === "number" ? (err.brineParse ? err.lineno : err.lineno + 1) : undefined;
    let kind: string;
    if (err.brineUndefined) kind = "";
    else if (err.brineParse) kind = "Jinja syntax error: ";
    else if (/^(UndefinedError): /.test(reason)) kind = "Jinja variable ";
    else kind = "Jinja error: ";
    reason = reason.replace(/^(Error|UndefinedError|FilterError|TemplateRaise|TypeError|RangeError|PyError): /, "");
    let src = err.brineSrc ?? "";
    if (!src) {
      try {
        src = (this.sources.get(file) ?? this.sources.get(name))?.read() ?? "";
      } catch {
        // the file went away; no context lines
      }
    }
    log.debug(`jinja render error in ${file}: ${raw}`);
    return new RenderError(file, line, `${kind}${reason}`, sourceContext(src, line));
  }
}

function hashCode(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (Math.imul(31, h) + s.charCodeAt(i)) | 0;
  return h;
}

