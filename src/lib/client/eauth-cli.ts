/**
 * External authentication from the command line, as Salt's CLI does it (salt/cli/salt.py with
 * salt.auth.Resolver): `-a <eauth>` asks for the username and password (or takes `--username` and
 * `--password`) and sends them with the publish; `-T` first trades them for a token (`mk_token`),
 * kept in `token_file` (default `~/.salt_token`, mode 0600) for later commands. Without `-a`, a saved
 * token is used when the master's CLI key cannot be read (a user who is not the master's).
 */
import { readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import type { MasterConfig } from "../../shared/config/defaults.js";

export interface EauthCliOptions {
  eauth?: string;
  makeToken?: boolean;
  username?: string;
  password?: string;
}

export function tokenFile(cfg: MasterConfig): string {
  const f = cfg.token_file;
  return typeof f === "string" && f ? f.replace(/^~(?=\/|$)/, os.homedir()) : path.join(os.homedir(), ".salt_token");
}

/** Lines typed (or piped) on stdin, one readline interface for every question asked. */
let input: { rl: readline.Interface; lines: AsyncIterator<string>; muted: boolean } | undefined;

/** One line from the terminal; with `hidden` nothing typed is echoed (a password). */
export async function prompt(question: string, hidden = false): Promise<string> {
  if (!input) {
    const rl = readline.createInterface({ input: process.stdin, output: process.stderr, terminal: process.stdin.isTTY === true });
    input = { rl, lines: rl[Symbol.asyncIterator](), muted: false };
    // a password typed at a terminal is not echoed: readline's output is muted while one is asked
    const out = rl as unknown as { _writeToOutput?: (s: string) => void };
    const write = out._writeToOutput?.bind(rl);
    out._writeToOutput = (s: string) => {
      if (!input?.muted && write) write(s);
    };
  }
  process.stderr.write(question);
  input.muted = hidden;
  try {
    const next = await input.lines.next();
    return next.done ? "" : next.value;
  } finally {
    input.muted = false;
    if (hidden && process.stdin.isTTY) process.stderr.write("\n");
  }
}

/** Lets the process end once the questions are answered. */
export function closePrompts(): void {
  input?.rl.close();
  input = undefined;
}

export type MkToken = (load: Record<string, unknown>) => Promise<unknown>;

/**
 * The credentials to send in the publish's kwargs: {eauth, username, password}, {token}, or {} (the
 * CLI key alone). Undefined when `-T` was asked and the master refused the login.
 */
export async function eauthKwargs(cfg: MasterConfig, o: EauthCliOptions, cliKeyReadable: boolean, mkToken: MkToken): Promise<Record<string, unknown> | undefined> {
  if (!o.eauth) {
    if (cliKeyReadable) return {};
    try {
      const token = readFileSync(tokenFile(cfg), "utf8").trim();
      return token ? { token } : {};
    } catch {
      return {};
    }
  }
  const username = o.username ?? (await prompt("username: "));
  const password = o.password ?? (await prompt("password: ", true));
  closePrompts();
  const creds = { eauth: o.eauth, username, password };
  if (!o.makeToken) return creds;
  const tdata = await mkToken({ cmd: "mk_token", ...creds });
  const token = tdata && typeof tdata === "object" ? (tdata as Record<string, unknown>).token : undefined;
  if (typeof token !== "string") return undefined;
  writeFileSync(tokenFile(cfg), token, { mode: 0o600 });
  return { token };
}
