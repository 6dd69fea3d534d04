import path from "node:path";
import { existsSync } from "node:fs";

/** The repository root: tests run from it (npm test), compiled to dist/test. */
export const repoRoot = process.cwd();
/** ../shared beside the repository (fixtures, specs, real-salt harness). */
export const sharedDir = path.resolve(repoRoot, "..", "shared");
export const fixturesDir = path.join(sharedDir, "fixtures", "salt-wire");
export const haveFixtures = existsSync(fixturesDir);
