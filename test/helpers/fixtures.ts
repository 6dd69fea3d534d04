/** Loading the golden Salt wire captures (../shared/fixtures/salt-wire) for tests. */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fixturesDir } from "./paths.js";

export type Gen = "v3-3007" | "v2-3006";
export const GENERATIONS: Gen[] = ["v3-3007", "v2-3006"];

export interface CapturedMessage {
  n: number;
  dir: "c2s" | "s2c";
  port: number;
  kind: string;
  key_used?: string | null;
  reply_to_n?: number;
  payload_msgpack_b64: string;
  payload: unknown;
  decoded?: Record<string, any>;
}

export function fixturePath(gen: Gen, ...rel: string[]): string {
  return path.join(fixturesDir, gen, ...rel);
}

export function readFixture(gen: Gen, ...rel: string[]): string {
  return readFileSync(fixturePath(gen, ...rel), "utf8");
}

export function allMessages(gen: Gen): CapturedMessage[] {
  return JSON.parse(readFixture(gen, "decoded", "decoded-all.json")).messages;
}

export function chosen(gen: Gen, name: string): CapturedMessage {
  return JSON.parse(readFixture(gen, "decoded", `decoded-${name}.json`));
}

export function symmetricKeys(gen: Gen): Map<string, string> {
  const j = JSON.parse(readFixture(gen, "keys", "symmetric-keys.json"));
  return new Map(j.keys.map((k: { name: string; key: string }) => [k.name, k.key]));
}

/**
 * The fixtures' JSON view → the values our decoder yields: `{$str_bytes_b64}` / `{$bin_b64}` /
 * `{$bytes_b64}` become Buffers, everything else stays as is.
 */
export function fromView(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(fromView);
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    for (const tag of ["$str_bytes_b64", "$bin_b64", "$bytes_b64"]) {
      if (typeof o[tag] === "string") return Buffer.from(o[tag] as string, "base64");
    }
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(o)) out[k] = fromView(x);
    return out;
  }
  return v;
}
