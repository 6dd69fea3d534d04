/**
 * PyYAML's safe_dump in block style (default_flow_style=False, allow_unicode=True, width 80, keys sorted), as
 * Salt's yaml outputter calls it with libyaml's emitter (CSafeDumper): the same scalar analysis and choice of
 * style (plain, single-quoted, double-quoted), the same folding of long lines at a space past column 80, the
 * same layout of mappings and sequences (a sequence under a key is not indented), following PyYAML's
 * emitter.py and libyaml's emitter.c where they differ (double-quoted folding). Bytes are printed as
 * their latin1 text (PyYAML would write !!binary); keys of 128 characters or more are not written in PyYAML's
 * complex-key form.
 */
import { sortKeys } from "./nested.js";
import { isIntNumber, reprFloat } from "./pyrepr.js";

const BREAKS = "\n\x85\u2028\u2029";
const WS = "\0 \t\r\n\x85\u2028\u2029";

/** What PyYAML's resolver reads a plain scalar as (YAML 1.1): a str only when it matches none of these. */
const IMPLICIT = [
  /^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$/,
  /^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$/,
  /^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/,
  /^(?:~|null|Null|NULL|)$/,
  /^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$/,
  /^<<$/,
  /^=$/,
];

interface Analysis {
  empty: boolean;
  multiline: boolean;
  allowBlockPlain: boolean;
  allowSingle: boolean;
}

function isUnicodePrintable(c: number): boolean {
  return c === 0x85 || (c >= 0xa0 && c <= 0xd7ff) || (c >= 0xe000 && c <= 0xfffd && c !== 0xfeff) || (c >= 0x10000 && c < 0x10ffff);
}

function analyze(s: string): Analysis {
  if (!s) return { empty: true, multiline: false, allowBlockPlain: true, allowSingle: true };
  const chars = [...s];
  let blockInd = false;
  let lineBreaks = false;
  let special = false;
  let leadingSpace = false;
  let leadingBreak = false;
  let trailingSpace = false;
  let trailingBreak = false;
  let breakSpace = false;
  let spaceBreak = false;
  if (s.startsWith("---") || s.startsWith("...")) blockInd = true;
  let preceded = true;
  let followed = chars.length === 1 || WS.includes(chars[1]!);
  let prevSpace = false;
  let prevBreak = false;
  for (let i = 0; i < chars.length; i++) {
    const ch = chars[i]!;
    if (i === 0) {
      if ("#,[]{}&*!|>'\"%@`".includes(ch)) blockInd = true;
      if ("?:".includes(ch) && followed) blockInd = true;
      if (ch === "-" && followed) blockInd = true;
    } else {
      if (ch === ":" && followed) blockInd = true;
      if (ch === "#" && preceded) blockInd = true;
    }
    if (BREAKS.includes(ch)) lineBreaks = true;
    const c = ch.codePointAt(0)!;
    if (!(ch === "\n" || (c >= 0x20 && c <= 0x7e)) && !isUnicodePrintable(c)) special = true;
    if (ch === " ") {
      if (i === 0) leadingSpace = true;
      if (i === chars.length - 1) trailingSpace = true;
      if (prevBreak) breakSpace = true;
      prevSpace = true;
      prevBreak = false;
    } else if (BREAKS.includes(ch)) {
      if (i === 0) leadingBreak = true;
      if (i === chars.length - 1) trailingBreak = true;
      if (prevSpace) spaceBreak = true;
      prevSpace = false;
      prevBreak = true;
    } else {
      prevSpace = false;
      prevBreak = false;
    }
    preceded = WS.includes(ch);
    followed = i + 2 >= chars.length || WS.includes(chars[i + 2]!);
  }
  let allowBlockPlain = true;
  let allowSingle = true;
  if (leadingSpace || leadingBreak || trailingSpace || trailingBreak) allowBlockPlain = false;
  if (breakSpace) allowBlockPlain = allowSingle = false;
  if (spaceBreak || special) allowBlockPlain = allowSingle = false;
  if (lineBreaks) allowBlockPlain = false;
  if (blockInd) allowBlockPlain = false;
  return { empty: false, multiline: lineBreaks, allowBlockPlain, allowSingle };
}

const ESCAPES: Record<string, string> = { "\0": "0", "\x07": "a", "\x08": "b", "\t": "t", "\n": "n", "\x0b": "v", "\x0c": "f", "\r": "r", "\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\xa0": "_", "\u2028": "L", "\u2029": "P" };

class Emitter {
  out = "";
  column = 0;
  whitespace = true;
  indention = true;
  indent = 0;
  constructor(
    private readonly best: number,
    private readonly width = 80,
  ) {}

  write(s: string): void {
    this.out += s;
    this.column += [...s].length;
  }
  lineBreak(): void {
    this.out += "\n";
    this.whitespace = true;
    this.indention = true;
    this.column = 0;
  }
  writeIndent(): void {
    const ind = this.indent;
    if (!this.indention || this.column > ind || (this.column === ind && !this.whitespace)) this.lineBreak();
    if (this.column < ind) {
      this.whitespace = true;
      this.write(" ".repeat(ind - this.column));
    }
  }
  indicator(ind: string, needWs: boolean, whitespace = false, indention = false): void {
    this.write(this.whitespace || !needWs ? ind : " " + ind);
    this.whitespace = whitespace;
    this.indention = this.indention && indention;
  }

  plain(text: string): void {
    if (!text) return;
    if (!this.whitespace) this.write(" ");
    this.whitespace = false;
    this.indention = false;
    const t = [...text];
    let spaces = false;
    let start = 0;
    for (let end = 0; end <= t.length; end++) {
      const ch = end < t.length ? t[end] : undefined;
      if (spaces) {
        if (ch !== " ") {
          if (start + 1 === end && this.column > this.width) {
            this.writeIndent();
            this.whitespace = false;
            this.indention = false;
          } else this.write(t.slice(start, end).join(""));
          start = end;
        }
      } else if (ch === undefined || " \n\x85\u2028\u2029".includes(ch)) {
        this.write(t.slice(start, end).join(""));
        start = end;
      }
      if (ch !== undefined) spaces = ch === " ";
    }
  }

  single(text: string): void {
    this.indicator("'", true);
    const t = [...text];
    let spaces = false;
    let breaks = false;
    let start = 0;
    for (let end = 0; end <= t.length; end++) {
      const ch = end < t.length ? t[end] : undefined;
      if (spaces) {
        if (ch === undefined || ch !== " ") {
          if (start + 1 === end && this.column > this.width && start !== 0 && end !== t.length) this.writeIndent();
          else this.write(t.slice(start, end).join(""));
          start = end;
        }
      } else if (breaks) {
        if (ch === undefined || !BREAKS.includes(ch)) {
          if (t[start] === "\n") this.lineBreak();
          for (const br of t.slice(start, end)) {
            if (br === "\n") this.lineBreak();
            else {
              this.out += br;
              this.whitespace = true;
              this.indention = true;
              this.column = 0;
            }
          }
          this.writeIndent();
          start = end;
        }
      } else if (ch === undefined || " \n\x85\u2028\u2029".includes(ch) || ch === "'") {
        if (start < end) {
          this.write(t.slice(start, end).join(""));
          start = end;
        }
      }
      if (ch === "'") {
        this.write("''");
        start = end + 1;
      }
      if (ch !== undefined) {
        spaces = ch === " ";
        breaks = BREAKS.includes(ch);
      }
    }
    this.indicator("'", false);
  }

  /** libyaml's double-quoted writer (Salt dumps with CSafeDumper): escapes; a break at a space once past the width. */
  double(text: string): void {
    this.indicator('"', true);
    const t = [...text];
    let spaces = false;
    const hex = (n: number, w: number) => n.toString(16).toUpperCase().padStart(w, "0");
    for (let i = 0; i < t.length; i++) {
      const ch = t[i]!;
      const c = ch.codePointAt(0)!;
      const printable = ch === "\n" || (c >= 0x20 && c <= 0x7e) || isUnicodePrintable(c);
      if (!printable || c === 0xfeff || BREAKS.includes(ch) || ch === '"' || ch === "\\") {
        this.write("\\" + (ESCAPES[ch] ?? (c <= 0xff ? "x" + hex(c, 2) : c <= 0xffff ? "u" + hex(c, 4) : "U" + hex(c, 8))));
        spaces = false;
      } else if (ch === " ") {
        if (!spaces && this.column > this.width && i !== 0 && i !== t.length - 1) {
          this.writeIndent();
          if (t[i + 1] === " ") this.write("\\");
        } else this.write(ch);
        spaces = true;
      } else {
        this.write(ch);
        spaces = false;
      }
    }
    this.indicator('"', false);
  }

  /** A scalar node: its text and whether it resolves to itself when plain (non-strings always do). */
  scalar(text: string, isStr: boolean, simpleKey: boolean): void {
    const a = analyze(text);
    const implicit = !isStr || !IMPLICIT.some((re) => re.test(text));
    this.indent += this.best; // expect_scalar: increase_indent(flow=True)
    if (implicit && !(simpleKey && (a.empty || a.multiline)) && a.allowBlockPlain) this.plain(text);
    else if (a.allowSingle && !(simpleKey && a.multiline)) this.single(text);
    else this.double(text);
    this.indent -= this.best;
  }
}

/** PyYAML's represent_float: Python's repr, lower case, ".0" before an exponent that has no point. */
function floatText(v: number): string {
  if (Number.isNaN(v)) return ".nan";
  if (v === Infinity) return ".inf";
  if (v === -Infinity) return "-.inf";
  const s = reprFloat(v).toLowerCase();
  return !s.includes(".") && s.includes("e") ? s.replace("e", ".0e") : s;
}

function isMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);
}

export function pyYamlDump(data: unknown, indent = 2): string {
  const best = indent > 1 && indent < 10 ? indent : 2;
  const e = new Emitter(best);
  const scalarOf = (v: unknown, simpleKey: boolean) => {
    if (v === null || v === undefined) e.scalar("null", false, simpleKey);
    else if (v === true || v === false) e.scalar(String(v), false, simpleKey);
    else if (typeof v === "bigint") e.scalar(v.toString(), false, simpleKey);
    else if (typeof v === "number") e.scalar(isIntNumber(v) ? String(v) : floatText(v), false, simpleKey);
    else if (v instanceof Uint8Array) e.scalar(Buffer.from(v).toString("latin1"), true, simpleKey);
    else e.scalar(String(v), true, simpleKey);
  };
  const node = (v: unknown, ctx: "root" | "mapping" | "sequence") => {
    if (Array.isArray(v) && v.length) {
      // expect_block_sequence: a sequence under a key is not indented
      const saved = e.indent;
      const indentless = ctx === "mapping" && !e.indention;
      if (ctx !== "root" && !indentless) e.indent += best;
      for (const item of v) {
        e.writeIndent();
        e.indicator("-", true, false, true);
        node(item, "sequence");
      }
      e.indent = saved;
    } else if (isMap(v) && Object.keys(v).length) {
      const saved = e.indent;
      if (ctx !== "root") e.indent += best;
      for (const k of sortKeys(Object.keys(v))) {
        // the first key of a mapping in a sequence lands on the dash's line (write_indent pads, no line break)
        e.writeIndent();
        scalarOf(k, true);
        e.indicator(":", false);
        node(v[k], "mapping");
      }
      e.indent = saved;
    } else if (Array.isArray(v) || isMap(v)) {
      e.indicator(Array.isArray(v) ? "[]" : "{}", true, false, false);
    } else scalarOf(v, false);
  };
  // the root node of a block mapping has indent 0; a root scalar gets PyYAML's document end marker
  e.indent = 0;
  node(data, "root");
  const rootScalar = !(Array.isArray(data) && data.length) && !(isMap(data) && Object.keys(data).length);
  return e.out + "\n" + (rootScalar && !(Array.isArray(data) || isMap(data)) ? "...\n" : "");
}
