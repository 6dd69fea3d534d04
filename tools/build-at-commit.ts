/**
 * Builds a few modules of brine as they were at an earlier commit, for tests that run two versions against each
 * other (test/state-sync/mixed-version.test.ts): the commit's `src/` and `tsconfig.json` from git (`git archive`,
 * nothing of the working tree), compiled with this checkout's TypeScript and node_modules into
 * `<tmpdir>/brine-at-<commit>-<entries' digest>/dist`, only the given entry files and what they import. A build is
 * kept and reused (a commit does not change); one directory per set of entries, so that a caller asking for more
 * entries than an earlier build made gets a build of its own (with one directory per commit, the new build lost the
 * rename to the older one and the caller got a build without its entries); it is made in a directory of its own and
 * renamed into place, so two runs at once do not see a half-made one.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

/** The build's directory (its compiled files under `dist/`), or why it cannot be made (no git, the commit absent: a shallow clone). */
export function buildAtCommit(repo: string, commit: string, entries: string[]): { dir: string } | { unavailable: string } {
  let full: string;
  try {
    full = execFileSync("git", ["-C", repo, "rev-parse", "--verify", "--quiet", `${commit}^{commit}`], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return { unavailable: `commit ${commit} is not in ${repo}'s git history (a shallow clone?) or git is missing` };
  }
  const digest = createHash("sha256").update([...entries].sort().join("\n")).digest("hex").slice(0, 8);
  const dir = path.join(os.tmpdir(), `brine-at-${full.slice(0, 12)}-${digest}`);
  if (entries.every((e) => existsSync(path.join(dir, "dist", e.replace(/\.ts$/, ".js"))))) return { dir };
  const work = `${dir}.building-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    const tar = path.join(work, "src.tar");
    execFileSync("git", ["-C", repo, "archive", "-o", tar, full, "src", "tsconfig.json"], { stdio: ["ignore", "ignore", "pipe"] });
    execFileSync("tar", ["-xf", tar, "-C", work]);
    rmSync(tar);
    symlinkSync(realpathSync(path.join(repo, "node_modules")), path.join(work, "node_modules"));
    // ESM, as in the repository's package.json (TypeScript's NodeNext emits by the nearest package.json's type)
    writeFileSync(path.join(work, "package.json"), JSON.stringify({ type: "module" }));
    writeFileSync(path.join(work, "tsconfig.part.json"), JSON.stringify({ extends: "./tsconfig.json", compilerOptions: { incremental: false, sourceMap: false, outDir: "dist", rootDir: "." }, include: [], files: entries }));
    const tsc = spawnSync(process.execPath, [path.join(repo, "node_modules", "typescript", "bin", "tsc"), "-p", path.join(work, "tsconfig.part.json")], { encoding: "utf8" });
    if (tsc.status !== 0) throw new Error(`tsc at ${commit} failed: ${(tsc.stdout + tsc.stderr).slice(0, 2000)}`);
    try {
      renameSync(work, dir);
    } catch {
      // another run made the same build meanwhile: use that one
      rmSync(work, { recursive: true, force: true });
    }
    return { dir };
  } catch (e) {
    rmSync(work, { recursive: true, force: true });
    throw e;
  }
}
