#!/usr/bin/env node
// The move of issue 14 ("folders are threads"), as a script that can be run again on a branch that was
// started before the move: it `git mv`s every file still under an old path into its new home and rewrites
// relative imports, worker URLs and path mentions in code and docs. Idempotent: on a tree already moved it
// changes nothing. Usage: node scripts/relayout.mjs [--dry-run]
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

// Exact files first, then folders (longest prefix wins). Paths are repository-relative, without extension
// for files (".ts" is implied), with a trailing "/" for folders.
const FILES = {
  "src/master/server": "src/main",
  "src/master/control-server": "src/main-thread/control-server",
  "src/master/maintenance": "src/main-thread/maintenance",
  "src/master/pidfile": "src/main-thread/pidfile",
  "src/master/cluster-node": "src/main-thread/cluster/cluster-node",
  "src/master/root-key": "src/lib/pki/root-key",
  "src/events/bus-server": "src/main-thread/bus-server",
  "src/events/event-frame": "src/shared/event-frame",
  "src/transport/send-queue": "src/main-thread/send-queue",
  "src/transport/length-framing": "src/shared/length-framing",
  "src/transport/free-port": "tools/free-port",
  "src/workers/req-handler/pool": "src/main-thread/req-pool",
  "src/workers/publisher/client": "src/main-thread/publisher-client",
  "src/api/host": "src/main-thread/api-host",
  "src/automation/host": "src/main-thread/automation-host",
  "src/store/lmdb-check": "src/main-thread/lmdb-check",
  "src/store/lmdb-check-child": "src/main-thread/lmdb-check-child",
  "src/auth/startup": "src/main-thread/eauth-startup",
  "src/metrics/exporter": "src/main-thread/metrics-exporter",
  "src/metrics/options": "src/main-thread/metrics-options",
  "src/cluster/cluster-service": "src/main-thread/cluster/cluster-service",
  "src/cluster/forwarding": "src/main-thread/cluster/forwarding",
  "src/cluster/chaos-filter": "src/main-thread/cluster/chaos-filter",
  "src/cluster/cache-sync/sync-service": "src/main-thread/cluster/sync-service",
  "src/cluster/peer-proxy/proxy": "src/main-thread/cluster/peer-proxy",
  "src/cluster/mirror": "src/main-thread/state-sync-host",
  "src/cluster/peer-health": "src/shared/peer-health",
  "src/cluster/shared-fs": "src/shared/shared-fs",
  "src/cluster/config": "src/shared/cluster-config",
  "src/cluster/job-mirror-worker": "src/workers/state-sync/worker",
  "src/cluster/job-records": "src/workers/state-sync/job-records",
  "src/cluster/ring-sync": "src/workers/raft/ring-sync",
  "src/cluster/raft-transport": "src/workers/raft/raft-transport",
  "src/cluster/local-cluster": "tools/local-cluster",
  "src/cluster/peer/log-budget": "src/shared/log-budget",
  "src/cluster/peer-proxy/host": "src/workers/raft/peer-proxy-host",
  "src/cluster/peer-proxy/port-wire": "src/workers/raft/peer-proxy-wire",
  "src/workers/raft/node-ids": "src/shared/node-ids",
  "src/minion/clock": "src/shared/coarse-timer",
  "src/minion/transport": "src/lib/zmq-req-client",
  "src/cli/brine-swarm": "tools/swarm/cli",
  "src/errors": "src/shared/errors",
  "src/log": "src/shared/log",
  // second step: shared and lib import no thread folder; request-worker glue lives with the request workers
  "src/cluster/state-machines/names": "src/shared/cluster-names",
  "src/workers/raft/state-machines/names": "src/shared/cluster-names",
  "src/cluster/state-machines/limits": "src/shared/cluster-limits",
  "src/workers/raft/state-machines/limits": "src/shared/cluster-limits",
  "src/cluster/peer/keys": "src/shared/cluster-keys",
  "src/workers/raft/peer/keys": "src/shared/cluster-keys",
  "src/workers/raft/latency-window": "src/shared/metrics/latency-window",
  "src/cluster/cache-sync/records": "src/shared/sync-records",
  "src/workers/state-sync/records": "src/shared/sync-records",
  "src/cluster/cache-sync/outbox": "src/shared/sync-outbox",
  "src/workers/state-sync/outbox": "src/shared/sync-outbox",
  "src/cluster/cache-sync/presence-board": "src/lib/store/presence-board",
  "src/workers/state-sync/presence-board": "src/lib/store/presence-board",
  "src/cluster/cache-sync/session-merge": "src/lib/store/session-merge",
  "src/workers/state-sync/session-merge": "src/lib/store/session-merge",
  "src/master/sessions": "src/lib/store/sessions",
  "src/workers/req-handler/sessions": "src/lib/store/sessions",
  "src/fileserver/index": "src/workers/req-handler/fileserver-subsystem",
  "src/lib/fileserver/index": "src/workers/req-handler/fileserver-subsystem",
  "src/pillar/index": "src/workers/req-handler/pillar-subsystem",
  "src/lib/pillar/index": "src/workers/req-handler/pillar-subsystem",
  // pure decisions the main thread uses too (its start-up warnings) live with the other ACL code
  "src/workers/req-handler/peer-acl": "src/lib/auth/peer-acl",
  "src/workers/req-handler/shown": "src/shared/shown",
};
const FOLDERS = {
  "src/master/": "src/workers/req-handler/",
  "src/cluster/cache-sync/": "src/workers/state-sync/",
  "src/cluster/peer/": "src/workers/raft/peer/",
  "src/cluster/state-machines/": "src/workers/raft/state-machines/",
  "src/raft/sim/": "tools/raft-sim/",
  "src/raft/": "src/workers/raft/core/",
  // the minion side of Salt's protocol is a library: brine's salt-syndic signs in upstream as a minion with it
  "src/minion/": "src/lib/minion/",
  "tools/minion/": "src/lib/minion/",
  "src/swarm/": "tools/swarm/",
  "src/config/": "src/shared/config/",
  "src/protocol/": "src/shared/protocol/",
  "src/metrics/": "src/shared/metrics/",
  "src/auth/": "src/lib/auth/",
  "src/client/": "src/lib/client/",
  "src/fileserver/": "src/lib/fileserver/",
  "src/pillar/": "src/lib/pillar/",
  "src/render/": "src/lib/render/",
  "src/targeting/": "src/lib/targeting/",
  "src/pki/": "src/lib/pki/",
  "src/store/": "src/lib/store/",
  "src/output/": "src/lib/output/",
  "src/wheel/": "src/lib/wheel/",
};
const folderKeys = Object.keys(FOLDERS).sort((a, b) => b.length - a.length);

/** The new home of a repository-relative path (with extension), or null when it does not move. */
export function newHome(rel) {
  const ext = path.extname(rel);
  const stem = rel.slice(0, rel.length - ext.length);
  if (FILES[stem] !== undefined) return FILES[stem] + ext;
  for (const k of folderKeys) if (rel.startsWith(k)) return FOLDERS[k] + rel.slice(k.length);
  return null;
}

const dry = process.argv.includes("--dry-run");
const git = (...a) => execFileSync("git", a, { encoding: "utf8" });
const tracked = git("ls-files", "-z").split("\0").filter(Boolean);
const untracked = git("ls-files", "-z", "--others", "--exclude-standard").split("\0").filter(Boolean);
const all = [...new Set([...tracked, ...untracked])].filter((f) => existsSync(f));
const exists = existsSync;

// 1. move
const moved = new Map(); // new path -> old path
for (const f of all) {
  if (!/\.(ts|mts|md)$/.test(f) || !(f.startsWith("src/") || f.startsWith("tools/"))) continue;
  const to = newHome(f);
  if (!to || to === f) continue;
  if (existsSync(to)) throw new Error(`cannot move ${f}: ${to} exists`);
  moved.set(to, f);
  if (dry) { console.log(`mv ${f} -> ${to}`); continue; }
  mkdirSync(path.dirname(to), { recursive: true });
  if (tracked.includes(f)) git("mv", f, to);
  else execFileSync("mv", [f, to]);
}
if (dry) process.exit(0);

// 2. rewrite relative specifiers in code (imports, dynamic imports, new URL(...)). A specifier that resolves
// from the file's place is left alone; one that does not is resolved from where the file was before the move
// (moved by this run, or by git following a renamed folder during a rebase) and pointed at the target's home.
const targetExists = (p) => existsSync(p) || (p.endsWith(".js") && (existsSync(p.slice(0, -3) + ".ts") || existsSync(p.slice(0, -3) + ".mts")));
function mapTarget(absOld) {
  const nh = newHome(absOld.endsWith(".js") ? absOld.slice(0, -3) + ".ts" : absOld);
  if (nh === null) return null;
  return absOld.endsWith(".js") ? nh.replace(/\.ts$/, ".js") : nh;
}
function formerPlaces(f) {
  const out = moved.has(f) ? [moved.get(f)] : [f];
  const ext = path.extname(f);
  for (const [o, n] of Object.entries(FILES)) if (n + ext === f) out.push(o + ext);
  for (const [o, n] of Object.entries(FOLDERS)) if (f.startsWith(n)) out.push(o + f.slice(n.length));
  return out;
}
const codeFiles = git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0").filter((f) => f && existsSync(f) && /\.(ts|mjs|js)$/.test(f) && !f.startsWith("dist/") && !f.includes("node_modules/"));
for (const f of new Set([...codeFiles, ...moved.keys()])) {
  if (!/\.(ts|mjs|js)$/.test(f)) continue;
  const src = readFileSync(f, "utf8");
  const out = src.replace(/((?:from|import)\s*\(?\s*|new URL\(\s*)(["'])(\.{1,2}\/[^"']+)\2/g, (m, pre, q, spec) => {
    const here = path.posix.normalize(path.posix.join(path.posix.dirname(f), spec));
    if (!moved.has(f) && targetExists(here)) return m;
    for (const from of formerPlaces(f)) {
      const targetOld = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
      const targetNew = mapTarget(targetOld) ?? targetOld;
      if (!targetExists(targetNew)) continue;
      let rel = path.posix.relative(path.posix.dirname(f), targetNew);
      if (!rel.startsWith(".")) rel = "./" + rel;
      if (spec.endsWith("/") && !rel.endsWith("/")) rel += "/";
      return `${pre}${q}${rel}${q}`;
    }
    return m;
  });
  if (out !== src) writeFileSync(f, out);
}

// 3. path mentions in text (docs, comments, scripts, package.json): src/old/x.ts|.js -> new, folder mentions
const textFiles = git("ls-files", "-z").split("\0").filter((f) => f && existsSync(f) && /\.(ts|mjs|js|md|json|sh)$|^\.ci\//.test(f) && f !== "scripts/relayout.mjs" && f !== "package-lock.json");
const fileRe = /\b(src\/[A-Za-z0-9_./-]+?)(\.ts|\.js)?(?=[^A-Za-z0-9_/.-]|$|\.(?![A-Za-z]))/g;
for (const f of textFiles) {
  const src = readFileSync(f, "utf8");
  const out = src.replace(fileRe, (m, p, ext) => {
    const withExt = p + (ext ?? "");
    if (ext) { const nh = newHome(p + ".ts"); return nh ? nh.replace(/\.ts$/, ext) : m; }
    // a folder mention (src/cluster/peer/ or src/cluster/peer)
    const asFolder = p.endsWith("/") ? p : p + "/";
    for (const k of folderKeys) if (asFolder === k || asFolder.startsWith(k)) return FOLDERS[k] + asFolder.slice(k.length, p.endsWith("/") ? undefined : -1);
    return withExt === m ? m : m;
  });
  if (out !== src) writeFileSync(f, out);
}
console.log(`relayout: moved ${moved.size} files`);
