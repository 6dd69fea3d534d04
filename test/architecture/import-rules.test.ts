/**
 * The import rules of docs/ARCHITECTURE.md ("Import rules"), checked on the TypeScript sources: which
 * thread may load what. Each rule is a pure function over the import graph (test/helpers/import-graph.ts),
 * run on the real tree and on the same tree with one planted violation, so a rule that cannot fail is
 * caught too.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { buildGraph, parseImports, readSources, runtimeClosure, type Graph } from "../helpers/import-graph.js";
import { repoRoot } from "../helpers/paths.js";

/** Thread folders: the code each thread runs (src/main.ts composes them and belongs to the main thread). */
const THREAD_FOLDERS = ["src/main-thread/", "src/workers/req-handler/", "src/workers/publisher/", "src/workers/raft/", "src/workers/state-sync/", "src/runners/", "src/api/", "src/automation/", "src/cli/"];
const threadOf = (f: string): string | undefined => (f === "src/main.ts" ? "src/main-thread/" : THREAD_FOLDERS.find((t) => f.startsWith(t)));

/** Threads that serve the master's own sockets' traffic: they never hold a socket (the main thread does). */
const SOCKETLESS_ENTRIES = ["src/workers/req-handler/worker.ts", "src/workers/publisher/worker.ts", "src/workers/state-sync/worker.ts"];

/**
 * What the main thread may load from the request workers' folder: the batch protocol and limits, and the
 * option readers and presence rule the main thread checks or reports with. Never a request handler.
 */
const REQ_HANDLER_PUBLIC = ["task.ts", "replies.ts", "limits.ts", "minion-policy.ts", "replay-window.ts", "presence.ts"].map((f) => `src/workers/req-handler/${f}`);

/** Pure cores: decisions and codecs with clocks and randomness injected; no module that does I/O. */
const PURE = (f: string): boolean =>
  /^src\/(shared\/protocol|shared\/sab-ring|workers\/raft\/core|workers\/raft\/state-machines|lib\/targeting)\//.test(f) ||
  ["src/workers/req-handler/auth-decision.ts", "src/lib/auth/acl.ts", "src/lib/auth/peer-acl.ts", "src/shared/shown.ts", "src/main-thread/batch-result.ts", "src/workers/req-handler/batch-replies.ts", "src/workers/req-handler/decode-budget.ts", "src/main-thread/open-batches.ts", "src/shared/cluster-names.ts", "src/shared/sync-records.ts", "src/lib/store/session-merge.ts", "src/workers/req-handler/session-wait.ts", "src/lib/pki/sorted-ids.ts", "src/shared/cluster-health.ts", "src/workers/state-sync/manifest.ts", "src/workers/state-sync/range-tree.ts", "src/workers/state-sync/wire.ts", "src/shared/placement.ts", "src/shared/publish-peers.ts", "src/shared/minion-placement.ts", "src/shared/nonce-owner.ts", "src/main-thread/sign-in-replies.ts"].includes(f);
/** Modules that do I/O (node:net is absent: the cores use only its address parsers). */
const IO_MODULES = ["node:fs", "node:fs/promises", "node:http", "node:https", "node:tls", "node:dgram", "node:child_process", "node:worker_threads", "zeromq", "lmdb", "fastify", "ldapts", "piscina"];

export function socketlessThreadsImportNoZeromq(g: Graph): string[] {
  return SOCKETLESS_ENTRIES.flatMap((e) => {
    const chain = runtimeClosure(g, e).get("zeromq");
    return chain ? [`${e} loads zeromq: ${chain.join(" > ")}`] : [];
  });
}

export function mainThreadLoadsNoRequestHandler(g: Graph): string[] {
  return [...runtimeClosure(g, "src/main.ts")]
    .filter(([f]) => f.startsWith("src/workers/req-handler/") && !REQ_HANDLER_PUBLIC.includes(f))
    .map(([, chain]) => `the main thread loads a request handler: ${chain.join(" > ")}`);
}

export function pureCoresDoNoIo(g: Graph): string[] {
  const out: string[] = [];
  for (const f of [...g.keys()].filter(PURE)) {
    const c = runtimeClosure(g, f);
    for (const io of IO_MODULES) if (c.has(io)) out.push(`pure ${f} loads ${io}: ${c.get(io)!.join(" > ")}`);
  }
  return out;
}

/** src/shared/ imports only src/shared/; src/lib/ only src/shared/ and src/lib/; src/ never imports tools/. */
export function layersPointDown(g: Graph): string[] {
  const out: string[] = [];
  for (const [f, imp] of g) {
    if (!f.startsWith("src/")) continue;
    for (const d of imp.runtime) {
      if (!d.startsWith("src/") && !d.startsWith("tools/")) continue;
      if (d.startsWith("tools/")) out.push(`${f} imports the tool ${d}`);
      else if (f.startsWith("src/shared/") && !d.startsWith("src/shared/")) out.push(`shared ${f} imports ${d}`);
      else if (f.startsWith("src/lib/") && !d.startsWith("src/shared/") && !d.startsWith("src/lib/")) out.push(`library ${f} imports ${d}`);
    }
  }
  return out;
}

/** The graph of thread folders (an edge when a file of one imports a file of another) has no cycle. */
export function threadFoldersHaveNoCycle(g: Graph): string[] {
  const edges = new Map<string, Map<string, string>>();
  for (const [f, imp] of g) {
    const a = threadOf(f);
    if (!a) continue;
    for (const d of imp.runtime) {
      const b = threadOf(d);
      if (!b || b === a) continue;
      if (!edges.has(a)) edges.set(a, new Map());
      if (!edges.get(a)!.has(b)) edges.get(a)!.set(b, `${f} > ${d}`);
    }
  }
  const out: string[] = [];
  const state = new Map<string, "open" | "done">();
  const walk = (n: string, path: string[]): void => {
    state.set(n, "open");
    for (const [m, why] of edges.get(n) ?? []) {
      if (state.get(m) === "open") out.push(`cycle between thread folders: ${[...path, n, m].join(" -> ")} (${why})`);
      else if (!state.has(m)) walk(m, [...path, n]);
    }
    state.set(n, "done");
  };
  for (const n of edges.keys()) if (!state.has(n)) walk(n, []);
  return out;
}

/** The module that may load cbor-x: the one codec of brine's own data (LMDB values go through lmdb's own setup). */
const CBOR_HOMES = ["src/shared/cbor.ts"];

/** One CBOR codec (docs/ARCHITECTURE.md): no other product module loads cbor-x itself. */
export function oneCborCodec(g: Graph): string[] {
  return [...g].filter(([f, imp]) => f.startsWith("src/") && !CBOR_HOMES.includes(f) && imp.runtime.includes("cbor-x")).map(([f]) => `${f} loads cbor-x itself (use src/shared/cbor.ts)`);
}

/** Every thread's entry: the main thread's (src/main.ts), and each thread or child the product starts. */
const threadEntries = (g: Graph): string[] => ["src/main.ts", ...new Set([...g].filter(([f]) => f.startsWith("src/")).flatMap(([, imp]) => imp.spawns))];

/**
 * No thread loads TypeBox: the schema is built and checked by src/shared/config/json-schema.ts (TypeBox gives
 * its static types, imported type-only, and is the tests' oracle); loading it cost each thread 0.1-0.7 s of CPU
 * at a master's start.
 */
export function noThreadLoadsTypeBox(g: Graph): string[] {
  return threadEntries(g).flatMap((e) => {
    const chain = runtimeClosure(g, e).get("@sinclair/typebox");
    return chain ? [`${e} loads TypeBox: ${chain.join(" > ")}`] : [];
  });
}

const RULES = { socketlessThreadsImportNoZeromq, mainThreadLoadsNoRequestHandler, pureCoresDoNoIo, layersPointDown, threadFoldersHaveNoCycle, oneCborCodec, noThreadLoadsTypeBox };

const sources = readSources(repoRoot, ["src", "tools"]);
const graph = buildGraph(sources);

test("the tree keeps every import rule", () => {
  for (const [name, rule] of Object.entries(RULES)) assert.deepEqual(rule(graph), [], name);
});

test("the import graph sees the threads' real entries (a rule over an empty graph would pass)", () => {
  for (const e of ["src/main.ts", ...SOCKETLESS_ENTRIES, "src/workers/raft/worker.ts", "src/runners/runner-thread.ts", "src/api/thread.ts", "src/automation/thread.ts"]) {
    assert.ok(graph.has(e), e);
    assert.ok(threadEntries(graph).includes(e), `${e} is a thread entry`);
  }
  assert.ok(runtimeClosure(graph, "src/main.ts").has("zeromq"), "the main thread holds the sockets");
  assert.ok(runtimeClosure(graph, "src/workers/req-handler/worker.ts").has("src/workers/req-handler/aes-funcs.ts"));
});

/** The tree with one more line in one file (only that file parsed again: buildGraph parses each file alone). */
function planted(file: string, line: string): Graph {
  assert.ok(sources.has(file), file);
  return new Map(graph).set(file, parseImports(file, `${line}\n${sources.get(file)}`));
}

test("a request worker that imports zeromq breaks the rule", () => {
  const v = socketlessThreadsImportNoZeromq(planted("src/workers/req-handler/publish.ts", 'import { Dealer } from "zeromq";'));
  assert.equal(v.length, 1);
  assert.match(v[0]!, /req-handler\/worker\.ts loads zeromq: .*publish\.ts > zeromq/);
});

test("the main thread importing a request handler breaks the rule, a type-only import does not", () => {
  assert.deepEqual(mainThreadLoadsNoRequestHandler(planted("src/main-thread/maintenance.ts", 'import type { AesFunc } from "../workers/req-handler/aes-funcs.js";')), []);
  const v = mainThreadLoadsNoRequestHandler(planted("src/main-thread/maintenance.ts", 'import { registerAesFunc } from "../workers/req-handler/aes-funcs.js";'));
  assert.ok(v.some((x) => x.includes("maintenance.ts > src/workers/req-handler/aes-funcs.ts")), v.join("\n"));
});

test("a pure core that reads a file breaks the rule", () => {
  const v = pureCoresDoNoIo(planted("src/workers/raft/core/quorum.ts", 'import { readFileSync } from "node:fs";'));
  assert.ok(v.some((x) => x.startsWith("pure src/workers/raft/core/quorum.ts loads node:fs")), v.join("\n"));
});

test("shared code importing a thread folder, and product code importing a tool, break the rule", () => {
  assert.ok(layersPointDown(planted("src/shared/secrets.ts", 'import { RequestPort } from "../main-thread/request-port.js";')).some((x) => x.startsWith("shared src/shared/secrets.ts imports src/main-thread/request-port.ts")));
  assert.ok(layersPointDown(planted("src/lib/store/job-cache.ts", 'import { freePort } from "../../../tools/free-port.js";')).some((x) => x.includes("imports the tool tools/free-port.ts")));
});

test("a thread folder that imports back into one that imports it makes a cycle", () => {
  const v = threadFoldersHaveNoCycle(planted("src/workers/raft/worker.ts", 'import { Maintenance } from "../../main-thread/maintenance.js";'));
  assert.ok(v.some((x) => x.includes("src/main-thread/") && x.includes("src/workers/raft/")), v.join("\n"));
});

test("a module that makes its own cbor-x codec breaks the one-codec rule", () => {
  const v = oneCborCodec(planted("src/workers/raft/held-jobs.ts", 'import { Encoder } from "cbor-x";'));
  assert.deepEqual(v, ["src/workers/raft/held-jobs.ts loads cbor-x itself (use src/shared/cbor.ts)"]);
  for (const home of CBOR_HOMES) assert.ok(graph.get(home)?.runtime.includes("cbor-x"), `${home} is where cbor-x is loaded`);
});

test("a thread that loads TypeBox at run time breaks the rule, a type-only import does not", () => {
  assert.deepEqual(noThreadLoadsTypeBox(planted("src/automation/options.ts", 'import type { TSchema } from "@sinclair/typebox";')), []);
  const v = noThreadLoadsTypeBox(planted("src/shared/config/options.ts", 'import { Value } from "@sinclair/typebox/value";'));
  for (const e of ["src/main.ts", "src/workers/req-handler/worker.ts", "src/api/thread.ts", "src/automation/thread.ts"]) assert.ok(v.some((x) => x.startsWith(`${e} loads TypeBox: `) && x.endsWith("src/shared/config/options.ts > @sinclair/typebox")), `${e}: ${v.join("\n")}`);
});
