/**
 * A runner context for calling runner functions directly: a fresh root with a real job cache and minion data
 * cache (LMDB), accepted keys, file and pillar roots, and a local client that answers with canned returns.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import type { JobReturn, LocalClient, PubOptions } from "../../src/lib/client/local-client.js";
import { KeyStore } from "../../src/lib/pki/key-store.js";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { MinionCache } from "../../src/lib/store/minion-cache.js";
import { EncodedReturn, type RunnerContext } from "../../src/runners/context.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";
import { controlLimits } from "../../src/shared/length-framing.js";
import { findRunner } from "../../src/runners/registry.js";

export interface RunnerHarness {
  ctx: RunnerContext;
  root: string;
  store: Store;
  /** what the fake client published */
  published: PubOptions[];
  /** lines the runner printed */
  printed: string[];
  /** call a runner by its Salt name */
  run(fun: string, arg?: unknown[], kwarg?: Record<string, unknown>): Promise<unknown>;
  close(): Promise<void>;
}

/** `answers(pub)`: the returns the fake client yields for one publish (an id with `missing` did not return). */
export function runnerHarness(opts: { accepted?: string[]; cfg?: Partial<MasterConfig>; answers?: (pub: PubOptions) => JobReturn[] } = {}): RunnerHarness {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-runners-"));
  const cfg: MasterConfig = {
    ...masterDefaults(),
    id: "runner_master",
    root_dir: root,
    cachedir: path.join(root, "cache"),
    pki_dir: path.join(root, "pki"),
    sock_dir: path.join(root, "sock"),
    file_roots: { base: [path.join(root, "srv", "salt")] },
    pillar_roots: { base: [path.join(root, "srv", "pillar")] },
    ...opts.cfg,
  };
  for (const d of [cfg.cachedir, path.join(root, "srv", "salt"), path.join(root, "srv", "pillar")]) mkdirSync(d, { recursive: true });
  const keys = new KeyStore(cfg.pki_dir);
  keys.ensureDirs();
  for (const id of opts.accepted ?? []) keys.write("accepted", id, "-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----\n");
  const store = openStore(cfg);
  const published: PubOptions[] = [];
  const printed: string[] = [];
  const client = {
    async *cmdIter(o: PubOptions): AsyncGenerator<JobReturn> {
      published.push(o);
      yield* opts.answers?.(o) ?? [];
    },
  } as unknown as LocalClient;
  const ctx: RunnerContext = {
    cfg,
    jobs: new JobCache(store),
    minions: new MinionCache(store),
    keys,
    client,
    print: (t) => printed.push(t),
    events: async function* () {},
  };
  return {
    ctx,
    root,
    store,
    published,
    printed,
    run: async (fun, arg = [], kwarg = {}) => {
      const fn = await findRunner(fun);
      if (!fn) throw new Error(`no runner ${fun}`);
      const ret = await fn(ctx, arg, kwarg);
      // a return the runner encoded itself reaches salt-run as those bytes: decoded as salt-run decodes them
      return ret instanceof EncodedReturn ? decodeWire(ret.bytes, controlLimits) : ret;
    },
    async close() {
      await store.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Write files under `dir` ({relpath: content}). */
export function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), content);
  }
}
