/**
 * Helpers for fileserver and pillar tests: a master with file and pillar trees, test minions signed in
 * to it, and the AES requests a Salt minion's RemoteClient sends (`_file_hash`, `_serve_file`, …).
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync, utimesSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { MasterConfig } from "../../src/shared/config/defaults.js";
import { keyPool, type MinionKeys } from "../../src/lib/minion/keys.js";
import { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { WireValue } from "../../src/shared/protocol/msgpack.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { repoRoot } from "../helpers/paths.js";

export const KEY_DIR = path.join(os.tmpdir(), "brine-test-minion-keys");
/** test/fixtures of the repository (tests run from the repository root). */
export const FIXTURES = path.join(repoRoot, "test", "fixtures");

/** A fixture tree path (source tree, not the build output). */
export function fixture(...p: string[]): string {
  return path.join(FIXTURES, ...p);
}

/** Write files under `root` ({relpath: content}); mtimes are set in the past so hashes are cached. */
export function writeTree(root: string, files: Record<string, string | Buffer>, pastMtime = true): void {
  for (const [rel, content] of Object.entries(files)) {
    const p = path.join(root, rel);
    mkdirSync(path.dirname(p), { recursive: true });
    writeFileSync(p, content);
    if (pastMtime) {
      const t = Date.now() / 1000 - 3600;
      utimesSync(p, t, t);
    }
  }
}

export function copyTree(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  cpSync(from, to, { recursive: true });
}

let keysP: Promise<MinionKeys[]> | undefined;
export function testKeys(): Promise<MinionKeys[]> {
  keysP ??= keyPool(8, { dir: KEY_DIR }).then((r) => r.keys);
  return keysP;
}

/** A master with auto_accept; `root` is its temporary root (made when omitted). */
export async function startFsMaster(overrides: Partial<MasterConfig> = {}, root?: string, logFile?: string): Promise<TestMaster> {
  return startTestMaster({ auto_accept: true, ...overrides }, root, { logFile });
}

const temps: string[] = [];
process.on("exit", () => {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});

/** A fresh temporary directory (removed when the test process exits). */
export function tempRoot(prefix = "brine-fs-"): string {
  const d = mkdtempSync(path.join(os.tmpdir(), prefix));
  temps.push(d);
  return d;
}

/** A v3 test minion signed in to `tm` (key slot `slot`), with the given grains. */
export async function minion(tm: TestMaster, id: string, slot: number, grains?: Record<string, unknown>, protocol: "v3" | "v2" = "v3"): Promise<TestMinion> {
  const keys = (await testKeys())[slot]!;
  const m = new TestMinion({
    id,
    master: "127.0.0.1",
    retPort: tm.retPort,
    keys,
    grains,
    protocol,
    acceptanceWaitMs: 100,
    randomReauthDelayMs: 0,
    reconDefaultMs: 50,
    reconMaxMs: 100,
    authTimeoutMs: 5000,
    requestTimeoutMs: 30_000,
    requestTries: 1,
  });
  await m.start();
  return m;
}

/** One AES request as the minion's RemoteClient sends it; resolves to the decrypted reply. */
export function ask(m: TestMinion, cmd: string, load: Record<string, unknown> = {}): Promise<WireValue> {
  return m.channel.send({ ...load, cmd, id: m.id }, m.requestOptions);
}

/** `_pillar` as Salt's RemotePillar sends it; resolves to the pillar. */
export function pillarOf(m: TestMinion, extra: Record<string, unknown> = {}): Promise<WireValue> {
  return m.channel.sendPrivate(
    { id: m.id, grains: m.grains, saltenv: null, pillarenv: null, pillar_override: {}, extra_minion_data: {}, ver: "2", cmd: "_pillar", ...extra },
    m.requestOptions,
  );
}

/** Fetch a whole file the way fileclient.get_file does: `_serve_file` from loc 0 until data is empty. */
export async function fetchFile(m: TestMinion, p: string, saltenv = "base", gzip?: number): Promise<{ data: Buffer; dest: unknown; chunks: number } | null> {
  const parts: Buffer[] = [];
  let loc = 0;
  let dest: unknown;
  for (let chunks = 0; ; chunks++) {
    const load: Record<string, unknown> = { path: p, saltenv, loc };
    if (gzip !== undefined) load.gzip = gzip;
    const r = (await ask(m, "_serve_file", load)) as Record<string, WireValue>;
    const raw = r.data;
    const data = Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw ?? ""), "utf8");
    if (data.length === 0) {
      if (chunks === 0 && !r.dest) return null;
      return { data: Buffer.concat(parts), dest: dest ?? r.dest, chunks };
    }
    dest = r.dest;
    const plain = r.gzip ? (await import("node:zlib")).gunzipSync(data) : data;
    parts.push(plain);
    loc += plain.length;
  }
}
