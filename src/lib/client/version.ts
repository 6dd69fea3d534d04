/**
 * What `--version` and `--versions-report` say: brine's own version (package.json) and the Salt release
 * whose protocol and behaviour brine reproduces, labelled as such (brine is not Python Salt).
 */
import { existsSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root: the nearest directory above this module holding package.json (dist/ moves with builds). */
function rootDir(): string {
  let d = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(d, "package.json")) && path.dirname(d) !== d) d = path.dirname(d);
  return d;
}

/** The Salt release brine's master and CLIs follow (the version manage.versions reports for the master). */
export const SALT_VERSION_SPOKEN = "3007.8";

export function brineVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(path.join(rootDir(), "package.json"), "utf8")) as { version?: string };
    return pkg.version ?? "unknown";
  } catch {
    return "unknown";
  }
}

/** `salt --version`: the program, brine's version, the Salt version it speaks. */
export function versionLine(prog: string): string {
  return `${prog} (brine ${brineVersion()}) speaking Salt ${SALT_VERSION_SPOKEN}`;
}

function moduleVersion(name: string): string {
  try {
    const pkg = JSON.parse(readFileSync(path.join(rootDir(), "node_modules", name, "package.json"), "utf8")) as { version?: string };
    return pkg.version ?? "Not Installed";
  } catch {
    return "Not Installed";
  }
}

/** `--versions-report`, in Salt's layout (right-aligned names), with brine's components. */
export function versionsReport(): string {
  const section = (title: string, rows: [string, string][]) => {
    const w = Math.max(...rows.map(([k]) => k.length), 14);
    return `${title}:\n` + rows.map(([k, v]) => `${k.padStart(w)}: ${v}`).join("\n");
  };
  return [
    section("Salt Version", [
      ["Salt", `${SALT_VERSION_SPOKEN} (the Salt version brine speaks; this is brine, not Python Salt)`],
      ["brine", brineVersion()],
    ]),
    section("Node.js Version", [["Node.js", process.version]]),
    section("Dependency Versions", ["zeromq", "msgpackr", "yaml", "nunjucks", "libsodium-wrappers", "lmdb", "fastify"].map((n) => [n, moduleVersion(n)] as [string, string])),
    section("System Versions", [
      ["kernel", os.release()],
      ["machine", os.machine()],
      ["release", os.release()],
      ["system", os.type()],
    ]),
  ].join("\n \n");
}
