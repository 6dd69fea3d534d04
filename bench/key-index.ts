/**
 * The targeting half of a publish to a glob (`salt 'm-00010*' test.ping`: the accepted ids, then the glob over
 * them, as publish.ts runs it through `ctx.acceptedIds()` and `checkMinions`) at 10k and 100k accepted keys,
 * CPU per publish from /proc (the main thread's utime + stime, /proc/self/task/<pid>/stat):
 *
 * - files, readdir per publish (`KeyStore.list`: what Salt 3007's `_pki_minions` does on every publish);
 * - files, readdir + stat per key (what the SALT_PKI_INDEX note measures for Salt's localfs_key listing);
 * - files, the per-thread listing brine keeps (`listCached`, `keys.cache_driver: localfs_key`): one stat of
 *   the directory per publish, a readdir only after a change;
 * - the indexed store (`mmap_key`): one LMDB read of the generation per publish;
 * - the same two with one key accepted before every publish (a readdir per publish for files; the one
 *   changed id applied by binary search for the index).
 *
 * Beside them, `pki.migrate_to_mmap`'s work (src/lib/pki/key-migrate.ts) over the same key files: wall time
 * and main-thread CPU of copying every key into the indexed store (the store already holds them: the
 * idempotent re-run, which writes every record again all the same).
 *
 * With strace on the machine, each variant is also run in a child under `strace -c` and its stat-family and
 * getdents64 calls per publish are counted: the claim "no stat() per key" is measured, not assumed.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { KeyStore, closeKeyDbs } from "../src/lib/pki/key-store.js";
import { checkMinions } from "../src/lib/targeting/check-minions.js";
import { migrateToIndexed } from "../src/lib/pki/key-migrate.js";
import { mainThreadCpuUs } from "./thread-cpu.js";
import type { BenchOptions, BenchRow } from "./types.js";

const PUB = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAt" + "x".repeat(330) + "\n-----END PUBLIC KEY-----\n";
const GLOB = "m-00010*";
const VARIANTS = ["readdir", "readdir+stat", "cached", "index", "cached+change", "index+change"] as const;
type Variant = (typeof VARIANTS)[number];

const id = (i: number) => `m-${String(i).padStart(6, "0")}`;

/** A pki dir with `n` accepted key files and the same keys in the indexed store. */
function makePki(n: number): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-bench-keys-"));
  const files = new KeyStore(dir);
  files.ensureDirs();
  const acc = path.join(dir, "minions");
  for (let i = 0; i < n; i++) writeFileSync(path.join(acc, id(i)), PUB);
  const db = new KeyStore(dir, "mmap_key").indexed()!;
  // the keys were accepted long ago (a steady master): the listing is trusted past the racy window
  const old = (Date.now() - 3600_000) / 1000;
  utimesSync(acc, old, old);
  for (let i = 0; i < n; i += 5000) db.putMany(Array.from({ length: Math.min(5000, n - i) }, (_, k) => ({ state: "accepted" as const, id: id(i + k), pub: PUB })));
  return dir;
}

/** One publish's targeting with `variant`; `seq` numbers the publishes (the changing variants accept one key each). */
function publishOnce(variant: Variant, files: KeyStore, index: KeyStore, seq: number): number {
  let ids: readonly string[];
  switch (variant) {
    case "readdir":
      ids = files.list("accepted");
      break;
    case "readdir+stat": {
      const acc = path.join(files.pkiDir, "minions");
      ids = files.list("accepted").filter((m) => statSync(path.join(acc, m)).isFile());
      break;
    }
    case "cached":
      ids = files.listCached("accepted");
      break;
    case "index":
      ids = index.listCached("accepted");
      break;
    case "cached+change":
      files.write("accepted", `new-${seq}`, PUB);
      ids = files.listCached("accepted");
      break;
    case "index+change":
      index.write("accepted", `new-${seq}`, PUB);
      ids = index.listCached("accepted");
      break;
  }
  return checkMinions(GLOB, "glob", { acceptedIds: ids, minionData: () => undefined, nodegroups: {}, greedy: true }).minions.length;
}

/** Runs `variant` for at least `minMs` of wall time after a warm-up; CPU µs per publish and publishes made. */
function measure(variant: Variant, dir: string, minMs: number): { cpuUs: number; n: number } {
  const files = new KeyStore(dir);
  const index = new KeyStore(dir, "mmap_key");
  for (let i = 0; i < 3; i++) publishOnce(variant, files, index, -1 - i);
  const c0 = mainThreadCpuUs() ?? NaN;
  const t0 = Date.now();
  let n = 0;
  while (Date.now() - t0 < minMs || n < 5) {
    if (publishOnce(variant, files, index, n) !== 10) throw new Error(`${variant}: the glob did not select its 10 minions`);
    n++;
  }
  return { cpuUs: ((mainThreadCpuUs() ?? NaN) - c0) / n, n };
}

/** stat-family and getdents64 calls per publish of `variant`, counted by strace in a child; undefined without strace. */
function syscallsPerPublish(variant: Variant, dir: string, publishes: number): { stat: number; getdents: number } | undefined {
  const which = spawnSync("sh", ["-c", "command -v strace"], { encoding: "utf8" });
  if (which.status !== 0) return undefined;
  const self = fileURLToPath(import.meta.url);
  const count = (n: number) => {
    const r = spawnSync("strace", ["-f", "-c", "-e", "trace=stat,lstat,fstat,newfstatat,statx,getdents64", process.execPath, self, "--probe", variant, dir, String(n)], { encoding: "utf8" });
    const calls = (name: string) => Number(new RegExp(`^\\s*[\\d.]+\\s+[\\d.]+\\s+\\d+\\s+(\\d+)\\s+(?:\\d+\\s+)?${name}$`, "m").exec(r.stderr)?.[1] ?? 0);
    return { stat: ["stat", "lstat", "fstat", "newfstatat", "statx"].reduce((s, k) => s + calls(k), 0), getdents: calls("getdents64") };
  };
  // the difference between two runs removes what loading node and the modules costs
  const a = count(0);
  const b = count(publishes);
  return { stat: (b.stat - a.stat) / publishes, getdents: (b.getdents - a.getdents) / publishes };
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const n of opts.full ? [10_000, 100_000, 1_000_000] : [10_000, 100_000]) {
    const dir = makePki(n);
    try {
      const c0 = mainThreadCpuUs() ?? NaN;
      const t0 = process.hrtime.bigint();
      const counts = migrateToIndexed(dir, new KeyStore(dir, "mmap_key").indexed(), false, { skipped: () => {} });
      const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
      if (counts.accepted !== n || counts.skipped !== 0) throw new Error(`migration counted ${JSON.stringify(counts)}`);
      rows.push({ figure: `${n.toLocaleString("en-US")} keys, pki.migrate_to_mmap`, value: wallMs, unit: "ms", better: "lower", note: `CPU ${(((mainThreadCpuUs() ?? NaN) - c0) / 1000).toFixed(0)} ms` });
      for (const v of VARIANTS) {
        const m = measure(v, dir, 2000);
        const sc = syscallsPerPublish(v, dir, 5);
        rows.push({
          figure: `${n.toLocaleString("en-US")} keys, ${v}: CPU per publish`,
          value: m.cpuUs / 1000,
          unit: "ms",
          better: "lower",
          note: `${m.n} publishes${sc ? `; per publish ${sc.stat.toFixed(1)} stat, ${sc.getdents.toFixed(1)} getdents64` : ""}`,
        });
      }
    } finally {
      await closeKeyDbs();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return rows;
}

/** `--probe VARIANT DIR N`: N publishes of one variant, for strace to count (no output). */
if (process.argv[2] === "--probe") {
  const [variant, dir, count] = process.argv.slice(3) as [Variant, string, string];
  const files = new KeyStore(dir);
  const index = new KeyStore(dir, "mmap_key");
  const n = Number(count);
  // a key store is opened and read once before counting starts in both runs (the difference is per publish)
  files.listCached("accepted");
  index.listCached("accepted");
  for (let i = 0; i < n; i++) publishOnce(variant, files, index, 1_000_000 + i);
  // the probe's own writes (the +change variants) are left for the parent to remove with the directory
  process.exit(0);
}
