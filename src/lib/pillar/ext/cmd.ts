/**
 * `cmd_json` and `cmd_yaml` external pillars (salt/pillar/cmd_json.py, cmd_yaml.py): run a command on the
 * master and overlay its output, parsed as JSON or YAML, onto the pillar. `%s` in the command is replaced
 * by the minion id.
 *
 * As Salt runs them:
 * - cmd_json runs through `cmd.run` without a shell (the command is split like Python's shlex.split) and
 *   parses stdout and stderr together (cmd.run merges them);
 * - cmd_yaml runs through `cmd.run_stdout(python_shell=True)`: `/bin/sh -c command`, stdout only;
 * - a command that cannot run or whose output does not parse is logged critical and adds nothing
 *   ("JSON data from <cmd> failed to parse"); the exit status is not looked at.
 * Where brine is stricter:
 * - cmd_json splits the command first and substitutes the id into each word, so an id can never add an
 *   argument (Salt substitutes, then splits);
 * - cmd_yaml substitutes the id into shell text, so an id with anything but letters, digits and `._-@:+,=`
 *   is refused (an `_errors` line) instead of reaching the shell: Salt's valid_id lets `;`, `$(…)`, quotes
 *   and spaces through;
 * - each command gets `brine_ext_pillar_cmd_timeout` seconds (its process group is killed after) and
 *   `cmdOutputBytesMax` bytes of output; past either, the pillar gets an `_errors` line;
 * - at most `cmdConcurrentMax` commands run at once per thread (a pillar refresh of many minions queues).
 */
import { spawn } from "node:child_process";
import os from "node:os";
import { getLogger } from "../../../shared/log.js";
import { BrineError, isBrineError } from "../../../shared/errors.js";
import { loadYaml } from "../../render/yaml.js";
import { registerExtPillar, type ExtPillarContext, type ExtPillarResult } from "../ext-pillar.js";

const log = getLogger("brine.pillar");

/** Largest output (stdout + stderr) read from an ext_pillar command. */
export const cmdOutputBytesMax = 16 * 1024 * 1024;
/** Commands running at once per thread; more wait their turn. */
export const cmdConcurrentMax = 4;
/** Characters a minion id may have to be put into cmd_yaml's shell text. */
const SHELL_SAFE_ID = /^[A-Za-z0-9._@:+,=-]+$/;

/** Python's shlex.split (POSIX mode, no comments). Throws on an unclosed quote, as Python does. */
export function shlexSplit(s: string): string[] {
  const out: string[] = [];
  let cur = "";
  let inWord = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === "'") {
      const end = s.indexOf("'", i + 1);
      if (end < 0) throw new Error("No closing quotation");
      cur += s.slice(i + 1, end);
      i = end;
      inWord = true;
    } else if (c === '"') {
      let j = i + 1;
      for (; j < s.length && s[j] !== '"'; j++) {
        if (s[j] === "\\" && (s[j + 1] === '"' || s[j + 1] === "\\")) j++;
        cur += s[j];
      }
      if (j >= s.length) throw new Error("No closing quotation");
      i = j;
      inWord = true;
    } else if (c === "\\") {
      if (i + 1 >= s.length) throw new Error("No escaped character");
      cur += s[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) out.push(cur);
      cur = "";
      inWord = false;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (inWord) out.push(cur);
  return out;
}

let running = 0;
const waiting: Array<() => void> = [];

async function slot<T>(fn: () => Promise<T>): Promise<T> {
  if (running >= cmdConcurrentMax) await new Promise<void>((r) => waiting.push(r));
  running++;
  try {
    return await fn();
  } finally {
    running--;
    waiting.shift()?.();
  }
}


export interface CommandOutput {
  /** stdout, or stdout and stderr in arrival order when `mergeStderr` */
  out: string;
  code: number | null;
}

/** Run argv (no shell) with bounded time and output. Rejects when it cannot start or exceeds a bound. */
export function runCommand(argv: string[], timeoutMs: number, mergeStderr: boolean): Promise<CommandOutput> {
  return slot(
    () =>
      new Promise<CommandOutput>((resolve, reject) => {
        const child = spawn(argv[0]!, argv.slice(1), { shell: false, cwd: os.homedir(), stdio: ["ignore", "pipe", "pipe"], detached: true });
        const chunks: Buffer[] = [];
        let bytes = 0;
        let failed: Error | null = null;
        const kill = (why: Error) => {
          if (failed) return;
          failed = why;
          try {
            if (child.pid) process.kill(-child.pid, "SIGKILL");
          } catch {
            child.kill("SIGKILL");
          }
        };
        const timer = setTimeout(() => kill(new BrineError("PILLAR_CMD_LIMIT", `the command did not finish within ${timeoutMs / 1000} s (brine_ext_pillar_cmd_timeout); killed`)), timeoutMs);
        const take = (b: Buffer) => {
          bytes += b.length;
          if (bytes > cmdOutputBytesMax) return kill(new BrineError("PILLAR_CMD_LIMIT", `the command wrote more than ${cmdOutputBytesMax} bytes (cmdOutputBytesMax); killed`));
          chunks.push(b);
        };
        child.stdout.on("data", take);
        child.stderr.on("data", (b: Buffer) => (mergeStderr ? take(b) : undefined));
        child.on("error", (e) => {
          clearTimeout(timer);
          reject(e);
        });
        child.on("close", (code) => {
          clearTimeout(timer);
          if (failed) reject(failed);
          else resolve({ out: Buffer.concat(chunks).toString("utf8"), code });
        });
      }),
  );
}

function commandOf(args: unknown[], kwargs: Record<string, unknown>, name: string): string {
  const c = kwargs.command ?? args[0];
  if (typeof c !== "string" || c.trim() === "") throw new Error(`${name} needs a command (a string)`);
  return c;
}

function timeoutOf(ctx: ExtPillarContext): number {
  const s = Number(ctx.cfg.brine_ext_pillar_cmd_timeout);
  return (Number.isFinite(s) && s > 0 ? s : 60) * 1000;
}

async function cmdJson(ctx: ExtPillarContext, args: unknown[], kwargs: Record<string, unknown>): Promise<ExtPillarResult> {
  const template = commandOf(args, kwargs, "cmd_json");
  const shown = template.split("%s").join(ctx.minionId);
  let argv: string[];
  try {
    argv = shlexSplit(template).map((w) => w.split("%s").join(ctx.minionId));
  } catch {
    log.critical(`JSON data from ${shown} failed to parse`);
    return {};
  }
  let out: CommandOutput;
  try {
    out = await runCommand(argv, timeoutOf(ctx), true);
  } catch (e) {
    if (isBrineError(e, "PILLAR_CMD_LIMIT")) throw Object.assign(e, { message: `cmd_json ${shown}: ${e.message}` });
    log.critical(`JSON data from ${shown} failed to parse (${(e as Error).message})`);
    return {};
  }
  try {
    return JSON.parse(out.out.trimEnd()) as ExtPillarResult;
  } catch {
    log.critical(`JSON data from ${shown} failed to parse`);
    return {};
  }
}

async function cmdYaml(ctx: ExtPillarContext, args: unknown[], kwargs: Record<string, unknown>): Promise<ExtPillarResult> {
  const template = commandOf(args, kwargs, "cmd_yaml");
  if (template.includes("%s") && !SHELL_SAFE_ID.test(ctx.minionId)) {
    throw new Error(`cmd_yaml: the minion id ${JSON.stringify(ctx.minionId)} has characters a shell would interpret; not run`);
  }
  const command = template.split("%s").join(ctx.minionId);
  let out: CommandOutput;
  try {
    out = await runCommand(["/bin/sh", "-c", command], timeoutOf(ctx), false);
  } catch (e) {
    if (isBrineError(e, "PILLAR_CMD_LIMIT")) throw Object.assign(e, { message: `cmd_yaml ${command}: ${e.message}` });
    log.critical(`YAML data from '${command}' failed to parse. Command output:\n${(e as Error).message}`);
    return {};
  }
  try {
    return loadYaml(out.out.trimEnd()) as ExtPillarResult;
  } catch {
    log.critical(`YAML data from '${command}' failed to parse. Command output:\n${out.out}`);
    return {};
  }
}

registerExtPillar("cmd_json", { run: cmdJson });
registerExtPillar("cmd_yaml", { run: cmdYaml });
