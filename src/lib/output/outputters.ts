/**
 * Salt's outputters for CLI results: nested (the default), json, yaml, txt, raw. No colour when the
 * stream is not a terminal (brine never colours; Salt's layout is kept).
 */
import { stringify } from "yaml";

export type OutName = "nested" | "json" | "yaml" | "txt" | "raw" | "quiet";
export const OUTPUTTERS: OutName[] = ["nested", "json", "yaml", "txt", "raw", "quiet"];

/** msgpack values as JSON/YAML carry them: bytes as latin1 text (byte for byte), big integers as numbers or digits. */
export function plain(v: unknown): unknown {
  if (Buffer.isBuffer(v)) return v.toString("latin1");
  if (v instanceof Uint8Array) return Buffer.from(v).toString("latin1");
  if (typeof v === "bigint") return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === "object") {
    const o: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) o[k] = plain(x);
    return o;
  }
  return v;
}

function scalar(v: unknown): string {
  if (v === null || v === undefined) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  return String(v);
}

function nestedLines(v: unknown, indent: number, out: string[]): void {
  const pad = " ".repeat(indent);
  if (Array.isArray(v)) {
    for (const item of v) {
      if (item && typeof item === "object") {
        out.push(`${pad}|_`);
        nestedLines(item, indent + 2, out);
      } else out.push(`${pad}- ${scalar(item)}`);
    }
    return;
  }
  if (v && typeof v === "object") {
    out.push(`${pad}----------`);
    for (const [k, x] of Object.entries(v)) {
      out.push(`${pad}${k}:`);
      nestedLines(x, indent + 4, out);
    }
    return;
  }
  for (const line of scalar(v).split("\n")) out.push(`${pad}${line}`);
}

/** Format one minion's (or one runner's) result block. */
export function formatResult(out: OutName, data: Record<string, unknown> | unknown, topLevelKeys = true): string {
  const v = plain(data);
  switch (out) {
    case "quiet":
      return "";
    case "json":
      return JSON.stringify(v, null, 4);
    case "yaml":
      return stringify(v).trimEnd();
    case "raw":
      return JSON.stringify(v);
    case "txt":
      if (v && typeof v === "object" && !Array.isArray(v) && topLevelKeys) {
        return Object.entries(v)
          .map(([k, x]) => `${k}: ${x && typeof x === "object" ? JSON.stringify(x) : scalar(x)}`)
          .join("\n");
      }
      return scalar(v);
    case "nested":
    default: {
      const lines: string[] = [];
      if (v && typeof v === "object" && !Array.isArray(v) && topLevelKeys) {
        for (const [k, x] of Object.entries(v)) {
          lines.push(`${k}:`);
          nestedLines(x, 4, lines);
        }
      } else nestedLines(v, 0, lines);
      return lines.join("\n");
    }
  }
}
