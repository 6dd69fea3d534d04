/**
 * Salt's table outputter (salt/output/table_out.py): lists of rows (dicts or lists) as boxed tables, with
 * the out.table.* settings (has_header, row_delimiter, delim, justify, separate_rows, prefix, suffix,
 * width, rows_key, labels_key, title, nested_indent).
 */
import { getColors, type Colors } from "./color.js";
import { sortKeys } from "./nested.js";
import type { OutOpts } from "./opts.js";
import { pyStr } from "./pyrepr.js";

function isMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** Python's str.center(width) (extra space goes to the right when the padding is odd and the text even...). */
function center(s: string, width: number): string {
  const n = [...s].length;
  if (width <= n) return s;
  const marg = width - n;
  // CPython: left = marg // 2 + (marg & width & 1)
  const left = Math.floor(marg / 2) + (marg & width & 1);
  return " ".repeat(left) + s + " ".repeat(marg - left);
}

const JUSTIFY: Record<string, (s: string, w: number) => string> = {
  center,
  right: (s, w) => s.padStart(w),
  left: (s, w) => s.padEnd(w),
};

function typeName(v: unknown): string {
  if (isMap(v)) return "dict";
  if (Array.isArray(v)) return "list";
  return typeof v;
}

class TableDisplay {
  readonly c: Colors;
  constructor(
    opts: OutOpts,
    private readonly s: {
      has_header: boolean;
      row_delimiter: string;
      delim: string;
      justify: string;
      separate_rows: boolean;
      prefix: string;
      suffix: string;
      width: number;
    },
  ) {
    this.c = getColors(opts.color);
  }

  u(indent: number, color: string, msg: string, suffix = ""): string {
    return " ".repeat(indent) + color + msg + this.c.ENDC + suffix;
  }

  wrap(text: string): string {
    const words = text.split(" ");
    let line = words[0]!;
    for (const word of words.slice(1)) {
      const last = line.slice(line.lastIndexOf("\n") + 1);
      const brk = last.length + word.split("\n", 1)[0]!.length >= this.s.width;
      line = line + (brk ? "\n" : " ") + word;
    }
    return line;
  }

  prepareRows(rows: string[][], indent: number, hasHeader: boolean): string[] {
    const out: string[] = [];
    const logical = rows.map((row) => {
      const parts = row.map((item) => this.wrap(item).split("\n"));
      // Python's map(lambda *a: a, *parts) stops at the shortest column
      const n = Math.min(...parts.map((p) => p.length));
      const phys: string[][] = [];
      for (let i = 0; i < n; i++) phys.push(parts.map((p) => p[i] || ""));
      return phys;
    });
    const all = logical.flat();
    const ncols = Math.min(...all.map((r) => r.length));
    const widths: number[] = [];
    for (let i = 0; i < ncols; i++) widths.push(Math.max(...all.map((r) => [...r[i]!].length)));
    const sep = this.s.row_delimiter.repeat(this.s.prefix.length + this.s.suffix.length + widths.reduce((a, b) => a + b, 0) + this.s.delim.length * (widths.length - 1));
    const justify = JUSTIFY[this.s.justify.toLowerCase()] ?? center;
    if (this.s.separate_rows) out.push(this.u(indent, this.c.LIGHT_GRAY!, sep));
    for (const phys of logical) {
      for (const row of phys) {
        const line = this.s.prefix + widths.map((w, i) => justify(row[i]!, w)).join(this.s.delim) + this.s.suffix;
        out.push(this.u(indent, this.c.WHITE!, line));
      }
      if (this.s.separate_rows || hasHeader) {
        out.push(this.u(indent, this.c.LIGHT_GRAY!, sep));
        hasHeader = false;
      }
    }
    return out;
  }

  displayRows(rows0: unknown[], labels0: unknown, indent: number): string[] {
    if (!rows0.length) return [];
    const t = typeName(rows0[0]);
    if (rows0.slice(1).some((r) => typeName(r) !== t)) return [];
    let labels = labels0 as unknown;
    if (isMap(labels)) labels = sortKeys(Object.keys(labels)).map((k) => (labels as Record<string, unknown>)[k]);
    let rows: unknown[][];
    if (t === "dict") {
      const first = rows0[0] as Record<string, unknown>;
      if (!labels || (Array.isArray(labels) && !labels.length)) {
        labels = sortKeys(Object.keys(first)).map((l) => l.replaceAll("_", " ").replace(/\w\S*/g, (w) => w[0]!.toUpperCase() + w.slice(1).toLowerCase()));
      }
      rows = (rows0 as Record<string, unknown>[]).map((row) => sortKeys(Object.keys(row)).map((k) => pyStr(row[k])));
    } else if (typeof rows0[0] === "string") rows = (rows0 as string[]).map((r) => [r]);
    else rows = rows0 as unknown[][];
    const lab = Array.isArray(labels) && labels.length ? (labels as unknown[]) : undefined;
    const all = (lab ? [lab, ...rows] : rows).map((r) => (Array.isArray(r) ? r.map(pyStr) : [pyStr(r)]));
    return this.prepareRows(all, indent + 4, Boolean(this.s.has_header && lab));
  }

  display(ret: unknown, indent: number, out: string[], rowsKey?: string, labelsKey?: string): string[] {
    if (isMap(ret)) {
      if (!rowsKey || rowsKey in ret) {
        for (const key of sortKeys(Object.keys(ret))) {
          if (rowsKey && key !== rowsKey) continue;
          const val = ret[key];
          if (!rowsKey) {
            out.push(this.u(indent, this.c.DARK_GRAY!, key, ":"));
            out.push(this.u(indent, this.c.DARK_GRAY!, "----------"));
          }
          if (Array.isArray(val)) out.push(...this.displayRows(val, labelsKey ? ret[labelsKey] : undefined, indent));
          else this.display(val, indent + 4, out, rowsKey, labelsKey);
        }
      } else {
        for (const key of sortKeys(Object.keys(ret))) this.display(ret[key], indent, out, rowsKey, labelsKey);
      }
    } else if (Array.isArray(ret) && !rowsKey) out.push(...this.displayRows(ret, undefined, indent));
    return out;
  }
}

export function table(ret: unknown, opts: OutOpts): string {
  const t = opts.table ?? {};
  const get = <T>(k: string, d: T): T => (t[k] !== undefined && t[k] !== null ? (t[k] as T) : d);
  const td = new TableDisplay(opts, {
    has_header: get("has_header", true),
    row_delimiter: get("row_delimiter", "-"),
    delim: get("delim", " | "),
    justify: get("justify", "center"),
    separate_rows: get("separate_rows", true),
    prefix: get("prefix", "| "),
    suffix: get("suffix", " |"),
    width: get("width", 50),
  });
  const out: string[] = [];
  const rowsKey = t.rows_key as string | undefined;
  const title = t.title as string | undefined;
  const base = Number(t.nested_indent ?? 0) || 0;
  // Salt passes title and colour the wrong way round here; the text is the same without colour
  if (title && rowsKey) out.push(" ".repeat(base) + title + td.c.WHITE + td.c.ENDC + "\n");
  return td.display(ret, base, out, rowsKey, t.labels_key as string | undefined).join("\n");
}
