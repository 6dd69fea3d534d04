/** Where a pushed file may land (src/workers/req-handler/push-path.ts): each row a path list a minion might send. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { confinePushPath, pushPathBytesMax, pushSegmentsMax } from "../../src/workers/req-handler/push-path.js";

const ok = (path: unknown, segments: string[]) => assert.deepEqual(confinePushPath(path), { ok: true, segments }, JSON.stringify(path));
const no = (path: unknown, why: RegExp) => {
  const r = confinePushPath(path);
  assert.equal(r.ok, false, JSON.stringify(path));
  assert.match((r as { reason: string }).reason, why);
};

test("what cp.push sends lands under its own segments", () => {
  ok(["etc", "fstab"], ["etc", "fstab"]);
  ok(["tmp", "peer cmp", "a b.txt"], ["tmp", "peer cmp", "a b.txt"]);
  ok(["fstab"], ["fstab"]);
  ok(["Ünïcode", "файл"], ["Ünïcode", "файл"]);
  ok(["a..b", "...", "x.."], ["a..b", "...", "x.."]); // dots inside names are names
});
test("segments holding '/' are split; empty and '.' segments are dropped (Salt joins and normalises)", () => {
  ok(["a/b", "c"], ["a", "b", "c"]);
  ok(["a", "", ".", "b"], ["a", "b"]);
  ok(["a//b/./c/"], ["a", "b", "c"]);
});
test("'..' is refused wherever it is, even when normalising would keep the path inside", () => {
  no([".."], /'\.\.'/);
  no(["..", "etc", "passwd"], /'\.\.'/);
  no(["a", "..", "b"], /'\.\.'/);
  no(["a/../../../etc/shadow"], /'\.\.'/);
  no(["a", "b/.."], /'\.\.'/);
});
test("absolute paths are refused (a leading empty element joins to '/…', as Salt refuses)", () => {
  no(["", "etc", "passwd"], /absolute/);
  no(["/etc/passwd"], /absolute/);
  no(["/"], /absolute/);
});
test("NUL and control characters are refused", () => {
  no(["a\0b"], /NUL/);
  no(["etc", "passwd\0.txt"], /NUL/);
  no(["a\nb"], /control/);
  no(["a\x1b[31m"], /control/);
  no(["a\x7f"], /control/);
});
test("over-long names and paths are refused", () => {
  ok(["x".repeat(255)], ["x".repeat(255)]);
  no(["x".repeat(256)], /over 255 bytes/);
  no(["é".repeat(128)], /over 255 bytes/); // 256 bytes in UTF-8
  no(Array.from({ length: pushSegmentsMax + 1 }, () => "d"), /more than/);
  no(Array.from({ length: 8 }, () => "y".repeat(200)), new RegExp(`over ${pushPathBytesMax} bytes`));
});
test("not a non-empty list of strings, or nothing left: refused", () => {
  no([], /non-empty list/);
  no("etc/passwd", /non-empty list/);
  no(null, /non-empty list/);
  no(["a", 1], /strings/);
  no([Buffer.from("a")], /strings/);
  no(["", "."].slice(1), /empty path/);
  no([".", "."], /empty path/);
});
