/** Scrapes a test master's metrics endpoint (`brine_metrics: {port: 0}`). */
import assert from "node:assert/strict";
import type { TestMaster } from "./master.js";

export interface Scrape {
  text: string;
  contentType: string | null;
  /** `name{labels}` as printed → value */
  values: Map<string, number>;
  /** a series' value; one not printed is 0 (families list only label values seen) */
  get(series: string): number;
}

export async function scrapeMetrics(tm: TestMaster): Promise<Scrape> {
  const r = await fetch(`http://127.0.0.1:${tm.server.metricsPort}/metrics`);
  assert.equal(r.status, 200);
  const text = await r.text();
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    values.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return { text, contentType: r.headers.get("content-type"), values, get: (s) => values.get(s) ?? 0 };
}
