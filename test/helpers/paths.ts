import path from "node:path";

/** The repository root: tests run from it (npm test), compiled to dist/test. */
export const repoRoot = process.cwd();
/** ../shared beside the repository (specs, the real-salt harness). */
export const sharedDir = path.resolve(repoRoot, "..", "shared");
/** The golden Salt wire captures, kept in the repository (copied unchanged from ../shared/fixtures/salt-wire). */
export const fixturesDir = path.join(repoRoot, "test", "fixtures", "salt-wire");
