/**
 * salt-cp: copy files from the master's host to the minions, as Salt 3007's salt/cli/cp.py does it.
 *
 * Plain mode publishes one `cp.recv` job, `[{path: text}, dest]` (files only; a directory is refused); the
 * answer is `{minion: {written path: True}}`, a minion that did not answer `False`. `--chunked` (`-C`) walks
 * the sources (directories recursively, empty directories too), reads each file in salt_cp_chunk_size
 * pieces, gzips each piece (unless `-n`), and publishes one `cp.recv_chunked` job per piece,
 * `[remote path, base64 chunk, append, gzip, mode]` (and `[remote path, None]` per empty directory); the answer
 * is `{minion: {remote path: True or the first error}}`. The minions write the files (Salt's cp module).
 *
 * Targets as Salt's salt-cp takes them: glob, -E, -L, -G, -P, -N (no compound: Salt's salt-cp has none,
 * and its -C means --chunked). Output: nested unless --out says otherwise; the exit code is 0 once the jobs
 * were published, as Salt's.
 */
import { existsSync, lstatSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { Command } from "commander";
import { LocalClient } from "../lib/client/local-client.js";
import { versionLine } from "../lib/client/version.js";
import { addOutputOptions, makeDisplay } from "../lib/output/display.js";
import { DEFAULT_CONFIG_DIR, exitWith, listTarget, loadConfigOrExit, setupCliLogging, targetTypeOf } from "./common.js";

const program = new Command("salt-cp")
  .usage("[options] '<target>' SOURCE [SOURCE...] DEST")
  .description("Copy files to the minions. salt-cp is NOT intended to broadcast large files, it is intended to handle text files.")
  .option("-c, --config-dir <dir>", "directory holding the master config", DEFAULT_CONFIG_DIR)
  .option("-t, --timeout <seconds>", "seconds to wait for the minions' answers")
  .option("-E, --pcre", "the target is a Perl-compatible regular expression")
  .option("-L, --list", "the target is a comma- or space-separated list of minion ids")
  .option("-G, --grain", "the target is a grain match (key:glob)")
  .option("-P, --grain-pcre", "the target is a grain match with a regular expression")
  .option("-N, --nodegroup", "the target is a nodegroup name")
  .option("--delimiter <char>", "delimiter for grain targets", ":")
  .option("-C, --chunked", "chunked transfer: large files, directories (recursively) and empty directories")
  .option("-n, --no-compression", "with --chunked: do not gzip the chunks")
  .option("-l, --log-level <level>", "console log level", "warning")
  .option("--version", "print brine's version and the Salt version it speaks")
  .argument("[target]")
  .argument("[paths...]")
  .allowExcessArguments(true);
addOutputOptions(program);
program.parse();
const o = program.opts();
if (o.version) {
  process.stdout.write(versionLine("salt-cp") + "\n");
  await exitWith(0);
}
const [tgtRaw, paths] = program.processedArgs as [string | undefined, string[]];
if (tgtRaw === undefined || paths.length < 2) {
  process.stdout.write(program.helpInformation());
  process.stderr.write("salt-cp: error: Insufficient arguments\n");
  await exitWith(2);
}
setupCliLogging(o.logLevel);
const flags: [string, string][] = [
  ["pcre", "pcre"],
  ["list", "list"],
  ["grain", "grain"],
  ["grainPcre", "grain_pcre"],
  ["nodegroup", "nodegroup"],
];
const tgtType = targetTypeOf("salt-cp", o, flags);
const tgt: string | string[] = tgtType === "list" ? listTarget(tgtRaw!) : tgtRaw!;
/** Python's os.path.realpath: resolves what exists, keeps the rest. */
function realpath(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return path.resolve(p);
  }
}
const src = paths.slice(0, -1).map(realpath);
const dest = paths[paths.length - 1]!;
const cfg = loadConfigOrExit(o.configDir);
const timeoutS = o.timeout !== undefined && Number(o.timeout) > 0 ? Number(o.timeout) : cfg.timeout;
const display = makeDisplay(o, cfg);
const client = new LocalClient(cfg);

/** LocalClient.cmd: publish, wait, {minion: return}, and False for each targeted minion that did not answer. */
async function cmd(fun: string, arg: unknown[]): Promise<Record<string, unknown>> {
  const ret: Record<string, unknown> = {};
  let minions: string[] = [];
  for await (const r of client.cmdIter(
    { tgt, tgtType: tgtType ?? "glob", fun, arg, kwargs: null, timeoutS },
    {
      onPub: (p) => {
        minions = p.minions ?? [];
      },
    },
  )) {
    if (!("missing" in r)) ret[r.id] = r.data.return;
  }
  for (const m of minions) if (!(m in ret)) ret[m] = false;
  return ret;
}

/** Salt's _mode: the permission bits of a file. */
function modeOf(p: string): number {
  return statSync(p).mode & 0o7777;
}

/** Salt's _recurse: files (with their modes) and empty directories under a source; a missing one ends salt-cp. */
function recurse(p: string, files: Map<string, number>, emptyDirs: string[]): void {
  if (!existsSync(p) && !isLink(p)) {
    process.stderr.write(`${p} does not exist\n`);
    process.exit(42);
  }
  if (!statSync(p).isDirectory()) {
    files.set(p, modeOf(p));
    return;
  }
  const subs = readdirSync(p).sort();
  if (!subs.length) emptyDirs.push(p);
  for (const s of subs) recurse(path.join(p, s), files, emptyDirs);
}

function isLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

async function runPlain(): Promise<Record<string, unknown>> {
  const files: Record<string, string> = {};
  for (const fn of src) {
    if (!existsSync(fn)) continue;
    if (statSync(fn).isDirectory()) {
      process.stdout.write(`${fn} is a directory, only files are supported in non-chunked mode. Use "--chunked" command line argument.\n`);
      process.exit(1);
    }
    files[fn] = readFileSync(fn, "utf8");
  }
  return cmd("cp.recv", [files, dest]);
}

/** Salt's readers: gzip each piece (compress_file: a last, possibly empty, piece) or the raw pieces (read_file). */
function* chunks(fn: string, size: number, gzip: boolean): Generator<Buffer> {
  const data = readFileSync(fn);
  if (gzip) {
    let off = 0;
    let read = size;
    while (read === size) {
      const piece = data.subarray(off, off + size);
      read = piece.length;
      off += read;
      yield gzipSync(piece, { level: 9 });
    }
  } else {
    for (let off = 0; off < data.length; off += size) yield data.subarray(off, off + size);
  }
}

async function runChunked(): Promise<Record<string, Record<string, unknown>>> {
  const files = new Map<string, number>();
  const emptyDirs: string[] = [];
  for (const fn of src) recurse(fn, files, emptyDirs);
  const empties = [...new Set(emptyDirs)].sort();
  const gzip = o.compression !== false;
  const destIsDir = empties.length > 0 || files.size > 1 || /[\\/]$/.test(dest);
  const chunkSize = cfg.salt_cp_chunk_size;
  const minions = await client.gatherMinions(tgt, tgtType ?? "glob").catch(() => [] as string[]);
  const remotePath = (fn: string): string | undefined => {
    if (src.includes(fn)) return destIsDir ? path.join(dest, path.basename(fn)) : dest;
    for (const p of src) {
      const rel = path.relative(p + path.sep, fn);
      if (rel.startsWith(".." + path.sep)) continue;
      return path.join(dest, path.basename(p), rel);
    }
    return undefined;
  };
  const ret: Record<string, Record<string, unknown>> = {};
  for (const [fn, mode] of files) {
    const remote = remotePath(fn)!;
    let index = 1;
    const failed = new Map<string, unknown>();
    for (const piece of chunks(fn, chunkSize, gzip)) {
      const chunk = Buffer.from(piece.toString("base64"), "latin1");
      const result = await cmd("cp.recv_chunked", [remote, chunk, index > 1, gzip, mode]);
      if (!Object.keys(result).length) {
        const msg = `Publish failed.${index > 1 ? " File partially transferred." : ""} It may be necessary to decrease salt_cp_chunk_size (current value: ${chunkSize})`;
        for (const m of minions) (ret[m] ??= {})[remote] = msg;
        break;
      }
      for (const [id, r] of Object.entries(result)) {
        (ret[id] ??= {})[remote] = r;
        if (r !== true && !failed.has(id)) failed.set(id, r);
      }
      index++;
    }
    for (const [id, msg] of failed) ret[id]![remote] = msg;
  }
  for (const dir of empties) {
    const remote = remotePath(dir)!;
    for (const [id, r] of Object.entries(await cmd("cp.recv_chunked", [remote, null]))) (ret[id] ??= {})[remote] = r;
  }
  return ret;
}

try {
  const ret = o.chunked ? await runChunked() : await runPlain();
  display.show(ret, "nested");
  await exitWith(0);
} catch (e) {
  process.stderr.write(`Salt request timed out. The master is not responding. (${(e as Error).message})\n`);
  await exitWith(2);
}
