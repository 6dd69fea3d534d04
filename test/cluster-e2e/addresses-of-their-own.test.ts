/**
 * Cluster tests run two at a time (npm test's concurrency), each with its balancer and masters on loopback
 * addresses of its own. Two files that pick the same address make one of them skip with "... is taken"
 * whenever they overlap; this test reads every cluster test's `LB` and `HOSTS` and finds such pairs.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { repoRoot } from "../helpers/paths.js";

function addressesOf(text: string): string[] {
  const lb = [...text.matchAll(/^const LB = "(127\.[0-9.]+)";/gm)].map((m) => m[1]!);
  const hosts = [...text.matchAll(/^const HOSTS = \[([^\]]*)\];/gm)].flatMap((m) => [...m[1]!.matchAll(/"(127\.[0-9.]+)"/g)].map((h) => h[1]!));
  return [...lb, ...hosts];
}

test("no two cluster test files listen on the same loopback address", () => {
  const dir = path.join(repoRoot, "test", "cluster-e2e");
  const owner = new Map<string, string>();
  const clashes: string[] = [];
  let seen = 0;
  for (const f of readdirSync(dir).filter((n) => n.endsWith(".test.ts"))) {
    for (const a of new Set(addressesOf(readFileSync(path.join(dir, f), "utf8")))) {
      seen++;
      const other = owner.get(a);
      if (other) clashes.push(`${a}: ${other} and ${f}`);
      else owner.set(a, f);
    }
  }
  assert.ok(seen >= 20, `found only ${seen} addresses: the pattern no longer matches how the tests name them`);
  assert.deepEqual(clashes, []);
});

test("the address reader finds a planted clash", () => {
  assert.deepEqual(addressesOf('const LB = "127.0.0.9";\nconst HOSTS = ["127.0.0.10", "127.0.0.11"];\n'), ["127.0.0.9", "127.0.0.10", "127.0.0.11"]);
});
