/** Run brine's compiled CLIs (dist/src/cli/*.js) against a test master's config. */
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { stringify } from "yaml";
import type { TestMaster } from "./master.js";

export const CLI_DIR = new URL("../../src/cli/", import.meta.url);

/** Write the test master's effective config as a Salt config dir so CLIs read the same settings. */
export function writeConfigDir(m: TestMaster): string {
  const dir = path.join(m.root, "etc", "salt");
  mkdirSync(dir, { recursive: true });
  const { conf_file: _c, root_dir: _r, ...rest } = m.cfg;
  // the paths are absolute, so root_dir goes; the pidfiles, relative to it, stay under the test's root: with
  // Salt's default (/var/run/salt-master.pid) two test files starting salt-master at once refused each other
  writeFileSync(path.join(dir, "master"), stringify({ ...rest, pidfile: path.join(m.root, "var", "run", "salt-master.pid"), syndic_pidfile: path.join(m.root, "var", "run", "salt-syndic.pid") }));
  return dir;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(name: "salt" | "salt-cp" | "salt-key" | "salt-run" | "salt-master", args: string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [new URL(`${name}.js`, CLI_DIR).pathname, ...args], { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d) => (stdout += d));
    p.stderr.on("data", (d) => (stderr += d));
    const t = setTimeout(() => p.kill("SIGKILL"), opts.timeoutMs ?? 60_000);
    p.on("close", (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr });
    });
    p.stdin.end(opts.input ?? "");
  });
}

/** `salt --out json` prints one document per minion: all of them as one map. */
export function jsonDocs(stdout: string): Record<string, unknown> {
  return Object.assign({}, ...stdout.trim().split(/\n(?=\{)/).filter(Boolean).map((b) => JSON.parse(b) as Record<string, unknown>));
}
