/** Salt's nested outputter (salt/output/nested.py): the default layout of execution-function returns. */
import { getColors, stripEsc, type Colors } from "./color.js";
import type { OutOpts } from "./opts.js";
import { isIntNumber, pyRepr, reprFloat, splitLines } from "./pyrepr.js";

function isMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** Python's sorted() of str keys (code point order). */
export function sortKeys(keys: string[]): string[] {
  return [...keys].sort((a, b) => {
    const x = [...a];
    const y = [...b];
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
      if (d) return d;
    }
    return x.length - y.length;
  });
}

class NestDisplay {
  constructor(
    private readonly c: Colors,
    private readonly strip: boolean,
    private readonly retcode: number,
  ) {}

  private u(indent: number, color: string, msg: string, prefix = "", suffix = ""): string {
    return " ".repeat(indent) + color + prefix + msg + this.c.ENDC + suffix;
  }

  display(ret: unknown, indent: number, prefix: string, out: string[]): string[] {
    if (ret instanceof Uint8Array) {
      const t = Buffer.from(ret);
      const text = t.toString("utf8");
      ret = Buffer.from(text, "utf8").equals(t) ? text : ret;
    }
    if (ret === null || ret === undefined || ret === true || ret === false) {
      out.push(this.u(indent, this.c.LIGHT_YELLOW!, ret === true ? "True" : ret === false ? "False" : "None", prefix));
    } else if (typeof ret === "number" || typeof ret === "bigint") {
      out.push(this.u(indent, this.c.LIGHT_YELLOW!, typeof ret === "number" && !isIntNumber(ret) ? reprFloat(ret) : String(ret), prefix));
    } else if (typeof ret === "string") {
      let first = true;
      for (let line of splitLines(ret)) {
        const p = first ? prefix : " ".repeat(prefix.length);
        if (this.strip) line = stripEsc(line);
        out.push(this.u(indent, this.c.GREEN!, line, p));
        first = false;
      }
    } else if (ret instanceof Uint8Array) {
      out.push(this.u(indent, this.c.GREEN!, pyRepr(ret), prefix));
    } else if (Array.isArray(ret)) {
      const color = this.retcode !== 0 ? this.c.RED! : this.c.GREEN!;
      for (const ind of ret) {
        if (Array.isArray(ind) || isMap(ind)) {
          out.push(this.u(indent, color, "|_"));
          this.display(ind, indent + 2, isMap(ind) ? "" : "- ", out);
        } else this.display(ind, indent, "- ", out);
      }
    } else if (isMap(ret)) {
      const color = this.retcode !== 0 ? this.c.RED! : this.c.CYAN!;
      if (indent) out.push(this.u(indent, color, "----------"));
      for (const key of sortKeys(Object.keys(ret))) {
        out.push(this.u(indent, color, key, prefix, ":"));
        this.display(ret[key], indent + 4, "", out);
      }
    }
    return out;
  }
}

export function nested(ret: unknown, opts: OutOpts, kw: { nested_indent?: number } = {}): string {
  const base = kw.nested_indent || opts.nested_indent || 0;
  const nd = new NestDisplay(getColors(opts.color), opts.strip_colors ?? true, opts._retcode ?? 0);
  return nd.display(ret, base, "", []).join("\n");
}
