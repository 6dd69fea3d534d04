/**
 * The git command line, as gitfs and git_pillar use it: `git` spawned without a shell, arguments as an
 * array, in a session of its own with no terminal prompts (GIT_TERMINAL_PROMPT=0, ssh in BatchMode unless
 * GIT_SSH_COMMAND/GIT_SSH say otherwise: a remote asking for a password or an unknown host key fails
 * instead of hanging), bounded time and output (the whole process group is killed past either). Only the updater (git-cache.ts: the main thread's maintenance timer and the fileserver.update
 * runner) runs git; request workers never do.
 */
import { spawn } from "node:child_process";
import { BrineError } from "../../shared/errors.js";

/** Longest a fetch or clone may run. */
export const gitFetchTimeoutMs = 10 * 60_000;
/** Longest any other git command may run. */
export const gitCommandTimeoutMs = 2 * 60_000;
/** Largest output kept from a git command (ls-tree of a large repository fits). */
export const gitOutputBytesMax = 256 * 1024 * 1024;

/** ssh without prompts, unless the operator chose the ssh command (GIT_SSH_COMMAND, GIT_SSH). */
function sshBatch(): Record<string, string> {
  return process.env.GIT_SSH_COMMAND || process.env.GIT_SSH ? {} : { GIT_SSH_COMMAND: "ssh -o BatchMode=yes" };
}


export interface GitRun {
  gitDir?: string;
  workTree?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
  /** `-c key=value` settings */
  config?: string[];
  /** written to git's stdin */
  input?: string;
}

/** SIGKILL a detached child's process group (git and the ssh or remote-helper it started). */
function killGroup(pid: number | undefined): void {
  if (!pid) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/** Run git; resolves with stdout, rejects with a BrineError GIT_FAILED (non-zero exit, timeout, too much output). */
export function git(args: string[], o: GitRun = {}): Promise<Buffer> {
  const full: string[] = [];
  for (const c of o.config ?? []) full.push("-c", c);
  if (o.gitDir) full.push(`--git-dir=${o.gitDir}`);
  if (o.workTree) full.push(`--work-tree=${o.workTree}`);
  full.push(...args);
  const timeoutMs = o.timeoutMs ?? gitCommandTimeoutMs;
  return new Promise((resolve, reject) => {
    const child = spawn("git", full, {
      shell: false,
      stdio: [o.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      env: { ...process.env, GIT_TERMINAL_PROMPT: "0", LC_ALL: "C", ...sshBatch(), ...(o.env ?? {}) },
      // its own session: ssh finds no terminal to ask on (a host key or passphrase prompt fails, never waits)
      detached: true,
    });
    if (o.input !== undefined) child.stdin!.end(o.input);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let bytes = 0;
    let failed: string | null = null;
    const timer = setTimeout(() => {
      failed = `timed out after ${timeoutMs / 1000} s`;
      killGroup(child.pid);
    }, timeoutMs);
    child.stdout!.on("data", (b: Buffer) => {
      bytes += b.length;
      if (bytes > gitOutputBytesMax) {
        failed ??= `more than ${gitOutputBytesMax} bytes of output`;
        killGroup(child.pid);
      } else out.push(b);
    });
    child.stderr!.on("data", (b: Buffer) => {
      if (err.reduce((n, x) => n + x.length, 0) < 64 * 1024) err.push(b);
    });
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(new BrineError("GIT_FAILED", `git ${args[0]}: ${e.message}`));
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      const stderr = Buffer.concat(err).toString("utf8").trim();
      if (failed) reject(new BrineError("GIT_FAILED", `git ${args[0]}: ${failed}`));
      else if (code !== 0) reject(new BrineError("GIT_FAILED", `git ${args[0]} exited ${code}: ${stderr.split("\n").slice(-3).join(" ")}`));
      else resolve(Buffer.concat(out));
    });
  });
}
