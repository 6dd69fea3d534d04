/**
 * The peer-publish ACLs (Salt's `peer:` and `peer_run:`), as a pure module: facts in (the option, the asking
 * minion's id, the function, its arguments, the minions its target selects), a verdict out. No I/O, no clock,
 * no logging: the handlers (peer-publish.ts) gather the facts, log and act.
 *
 * Salt's decision (salt/master.py AESFuncs.__verify_minion_publish, salt/daemons/masterapi.py minion_runner,
 * salt/utils/minions.py CkMinions.auth_check with publish_validate), in its order:
 * - `peer` must be a mapping; the load must carry fun, arg, tgt, ret, id (and tok: 3006.8 requires it, 3007
 *   checks it in the request layer);
 * - a function starting `publish.` is refused (a minion may not make another minion publish: no loops);
 * - the minion's rights are the lists of every key (a regex) that matches its id;
 * - `a,b` in fun is a compound job: fun becomes a list, and each argument (a string) its whitespace-split list;
 * - pillar targets must select the same minions matched exactly as matched by glob/pcre (publish_validate:
 *   `pillar`/`pillar_pcre` → `pillar_exact`, `compound` → `compound_pillar_exact`), so no minion reaches
 *   others through pillar globbing it cannot see;
 * - then auth_check: entries are function regexes or `{<compound target>: [functions, or {fun: {args, kwargs}}]}`.
 * `peer_run`: the same id matching, then any entry (a regex) matching the runner function.
 *
 * Where brine is stricter than Salt, as for `external_auth` (src/lib/auth/acl.ts): the id regexes and function
 * regexes match the WHOLE id or name (Salt's `re.match` is a prefix match: a key `web` matched `web1` and
 * `webhook`, an entry `test.ping` also allowed `test.ping_all`); a compound job needs every one of its
 * functions allowed (Salt: any one).
 */
import { fullMatch, publishAllowed, type AuthList } from "./acl.js";
import { shown } from "../../shared/shown.js";

export type PeerVerdict = { ok: true; fun: string | string[]; arg: unknown[] } | { ok: false; reason: string };

/** The entries of every key of `acl` (a `peer:` or `peer_run:` mapping) whose regex matches `id` whole. */
export function peerRights(acl: unknown, id: string): AuthList {
  const out: AuthList = [];
  if (!isMapping(acl)) return out;
  for (const [pattern, entries] of Object.entries(acl)) {
    if (Array.isArray(entries) && fullMatch(pattern, id)) out.push(...(entries as unknown[]));
  }
  return out;
}

export interface PeerPublishFacts {
  /** the master's `peer:` option */
  peer: unknown;
  /** the request's load (after the request layer checked its id and tok) */
  load: Record<string, unknown>;
  /** the minions the job's target selects, as published */
  minions: readonly string[];
  /** the minions the target selects with pillar matched exactly (publish_validate); equal to `minions` for other target types */
  exactMinions: readonly string[];
  /** the minions an ACL entry's compound target selects */
  minionsOf(target: string): readonly string[];
}

/** Keys a minion's `minion_pub` / `minion_publish` load must carry. */
const REQUIRED = ["fun", "arg", "tgt", "ret", "id", "tok"] as const;

/** May this minion publish this job to its peers? */
export function peerPublishDecision(f: PeerPublishFacts): PeerVerdict {
  if (!isMapping(f.peer) || Object.keys(f.peer).length === 0) return { ok: false, reason: "peer publishing is not enabled (`peer:` is empty)" };
  const missing = REQUIRED.filter((k) => !(k in f.load));
  if (missing.length) return { ok: false, reason: `the request lacks ${missing.join(", ")}` };
  const { fun, arg, id } = f.load;
  if (typeof fun !== "string" || fun.length === 0 || typeof id !== "string") return { ok: false, reason: "fun and id must be strings" };
  if (!Array.isArray(arg)) return { ok: false, reason: "arg must be a list" };
  if (/^publish./.test(fun)) return { ok: false, reason: "a publish.* function may not be published by a minion (no publish loops)" };
  const rights = peerRights(f.peer, id);
  if (rights.length === 0) return { ok: false, reason: `no peer: entry matches minion id ${id}` };
  let funs: string | string[] = fun;
  let args: unknown[] = arg;
  if (fun.includes(",")) {
    if (!arg.every((a) => typeof a === "string")) return { ok: false, reason: "a compound job's arguments must be strings" };
    funs = fun.split(",");
    args = (arg as string[]).map((a) => a.split(/\s+/).filter(Boolean));
  }
  const exact = new Set(f.exactMinions);
  if (f.minions.some((m) => !exact.has(m))) return { ok: false, reason: "the target reaches minions through pillar globbing or a pillar regex (peer targets match pillar exactly)" };
  const allowed = publishAllowed({ authList: rights, fun: funs, arg: args, minions: f.minions, minionsOf: f.minionsOf });
  if (!allowed) return { ok: false, reason: `${Array.isArray(funs) ? funs.join(",") : funs} on ${shown(f.load.tgt, 128)} is not in the peer: rights of ${id}` };
  return { ok: true, fun: funs, arg: args };
}

/** The target type `publish_validate` compares a peer job's target with (pillar matched exactly). */
export function exactTargetType(tgtType: string): string {
  const t = tgtType.toLowerCase();
  if (t === "pillar" || t === "pillar_pcre") return "pillar_exact";
  if (t === "compound") return "compound_pillar_exact";
  return tgtType;
}

/** May this minion run this runner function (`minion_runner`)? */
export function peerRunDecision(peerRun: unknown, load: Record<string, unknown>): { ok: true; fun: string } | { ok: false; reason: string } {
  if (!isMapping(peerRun) || Object.keys(peerRun).length === 0) return { ok: false, reason: "peer runners are not enabled (`peer_run:` is empty)" };
  const missing = ["fun", "arg", "id", "tok"].filter((k) => !(k in load));
  if (missing.length) return { ok: false, reason: `the request lacks ${missing.join(", ")}` };
  const { fun, id, arg } = load;
  if (typeof fun !== "string" || fun.length === 0 || typeof id !== "string") return { ok: false, reason: "fun and id must be strings" };
  if (!Array.isArray(arg)) return { ok: false, reason: "arg must be a list" };
  const rights = peerRights(peerRun, id);
  if (!rights.some((r) => typeof r === "string" && fullMatch(r, fun))) return { ok: false, reason: `runner ${fun} is not in the peer_run: rights of ${id}` };
  return { ok: true, fun };
}

/**
 * Keys of a `peer:` or `peer_run:` mapping whose meaning is narrower in brine than in Salt: plain ids such as `web1`,
 * which Salt's prefix match also applied to `web10`, `web1-old`… (a start-up warning names them).
 */
export function prefixOnlyPeerKeys(acl: unknown): string[] {
  return isMapping(acl) ? Object.keys(acl).filter((k) => /^[A-Za-z0-9_.-]+$/.test(k)) : [];
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}
