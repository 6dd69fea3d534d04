/**
 * Shedding (Salt's migration.perform_shed, salt-cluster.md §7): drop from this master's job cache the keys a
 * ring says it does not own. Salt's result shape:
 *   {status: "ok" | "skipped" | "error", ring, dropped, kept, subbanks_dropped, dry_run, reason? | error?}
 * `dropped` and `kept` count keys across every listed bank; `subbanks_dropped` the subbanks (a jid's returns,
 * `jobs/returns/{key}`) flushed for unowned keys of the first bank. A dry run counts and removes nothing.
 *
 * Unlike Salt (its hazards, §7): ownership is the ring's policy, not the primary owner alone. Under
 * `members: self` every voter owns every key (nothing is shed); under `members: voters` a master owns a key
 * when it is among the key's first `replicas` nodes. A master that is not a voter of the ring sheds nothing
 * (`skipped`), as in Salt a non-founder.
 *
 * Banks are Salt's names for brine's job cache databases (lmdb-env.ts): jobs/loads, jobs/minions,
 * jobs/endtimes, jobs/nocache, and the returns subbank jobs/returns/{key}. `driver` is Salt's cache driver:
 * brine has one job cache, so only None (or "lmdb") is taken.
 */
import { writeFileSync, readFileSync, renameSync } from "node:fs";
import path from "node:path";
import type { Database } from "lmdb";
import type { Store } from "./lmdb-env.js";
import { MINION_BANK_NAMES, type MinionBank, type MinionShedAnswer } from "../../shared/minion-placement.js";

/** Salt's default banks of shed_unowned. */
export const SHED_BANKS = Object.freeze(["jobs/loads", "jobs/minions", "jobs/endtimes", "jobs/nocache"]);
export const SHED_SUBBANK_TEMPLATE = "jobs/returns/{key}";
/** Salt's status file, under cachedir. */
export const SHED_STATUS_FILE = "cluster-shed-status.json";
/** removals in flight before they are awaited */
const removalsInFlightMax = 10_000;

export interface ShedResult {
  status: "ok" | "skipped" | "error";
  ring: string;
  dropped: number;
  kept: number;
  subbanks_dropped: number;
  dry_run: boolean;
  reason?: string;
  error?: string;
  /** minion banks (minions/data, minions/mine): records not owned here kept because no owner holds them as new */
  kept_sole_copy?: number;
}

export interface ShedArgs {
  ring: string;
  banks: readonly string[];
  /** null: no subbank */
  subbankTemplate: string | null;
  driver: string | null;
  dryRun: boolean;
}

/** Whether this master may shed, and what it owns: decided from the ring's state (see the header). */
export type ShedOwnership = { skip: string } | { owns: (key: string) => boolean };

export function shedOwnership(input: {
  ring: string;
  self: string;
  /** the ring's registry record, undefined when not registered */
  record: { founding_voters: readonly string[]; status: string } | undefined;
  members: "self" | "voters";
  /** the key's owners under the ring's replicas (the shared ring's preference order) */
  owners: (key: string) => readonly string[];
  /** this master has the ring's slot table (published, with nodes): without it nothing is shed */
  tableReady: boolean;
}): ShedOwnership {
  if (input.record?.status !== "active") return { skip: `ring ${input.ring} is not active` };
  if (!input.record.founding_voters.includes(input.self)) return { skip: `${input.self} is not a voter of ring ${input.ring}` };
  if (input.members === "self") return { owns: () => true };
  if (!input.tableReady) return { skip: `ring ${input.ring} has no slot table on ${input.self} yet` };
  return { owns: (key) => input.owners(key).includes(input.self) };
}

const BANK_DB: Record<string, keyof Store> = {
  "jobs/loads": "loads",
  "jobs/minions": "minions",
  "jobs/endtimes": "endtimes",
  "jobs/nocache": "nocache",
};

function empty(a: ShedArgs, status: ShedResult["status"], extra: { reason: string } | { error: string }): ShedResult {
  return { status, ring: a.ring, dropped: 0, kept: 0, subbanks_dropped: 0, dry_run: a.dryRun, ...extra };
}

/** Runs a shed over `store` (see the header). Never throws for a bad argument: status "error" says why. */
export async function shedUnowned(store: Store, a: ShedArgs, ownership: ShedOwnership): Promise<ShedResult> {
  if (a.driver !== null && a.driver !== "lmdb") return empty(a, "error", { error: `driver ${a.driver}: brine's job cache is its LMDB store (driver None)` });
  const unknown = a.banks.filter((b) => !(b in BANK_DB));
  if (unknown.length > 0) return empty(a, "error", { error: `unknown bank ${unknown.join(", ")}: brine's job cache has ${Object.keys(BANK_DB).join(", ")} (and the minion banks ${Object.keys(MINION_BANK_NAMES).join(", ")})` });
  if (a.subbankTemplate !== null && a.subbankTemplate !== SHED_SUBBANK_TEMPLATE) {
    return empty(a, "error", { error: `subbank_template ${a.subbankTemplate}: brine's job cache has ${SHED_SUBBANK_TEMPLATE}` });
  }
  if ("skip" in ownership) return empty(a, "skipped", { reason: ownership.skip });
  const r: ShedResult = { status: "ok", ring: a.ring, dropped: 0, kept: 0, subbanks_dropped: 0, dry_run: a.dryRun };
  let pending: Promise<boolean>[] = [];
  const remove = async (db: Database<unknown, string>, key: string) => {
    if (a.dryRun) return;
    pending.push(db.remove(key));
    if (pending.length >= removalsInFlightMax) {
      await Promise.all(pending);
      pending = [];
    }
  };
  for (const [i, bank] of a.banks.entries()) {
    const db = store[BANK_DB[bank]!] as Database<unknown, string>;
    for (const key of [...db.getKeys()]) {
      if (ownership.owns(key)) {
        r.kept++;
        continue;
      }
      r.dropped++;
      await remove(db, key);
      if (i !== 0 || a.subbankTemplate === null) continue;
      let any = false;
      for (const rk of [...store.returns.getKeys({ start: `${key}/`, end: `${key}0` })]) {
        any = true;
        await remove(store.returns as Database<unknown, string>, rk);
      }
      if (any) r.subbanks_dropped++;
    }
  }
  await Promise.all(pending);
  return r;
}

/** Writes Salt's status file (result + source + updated_at; brine adds node_id), atomically. */
export function writeShedStatus(cachedir: string, result: ShedResult, source: "runner" | "runner_originator" | "peer_request", nodeId: string): void {
  const file = path.join(cachedir, SHED_STATUS_FILE);
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  writeFileSync(tmp, JSON.stringify({ ...result, source, updated_at: Date.now() / 1000, node_id: nodeId }), { mode: 0o600 });
  renameSync(tmp, file);
}

/** Salt's shed_status(): the file, or {status: "missing", path} / {status: "error", reason}. */
export function readShedStatus(cachedir: string): Record<string, unknown> {
  const file = path.join(cachedir, SHED_STATUS_FILE);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return { status: "missing", path: file };
  }
  try {
    const v = JSON.parse(text) as unknown;
    if (typeof v === "object" && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
    return { status: "error", reason: `${file} is not a JSON object` };
  } catch (e) {
    return { status: "error", reason: `${file}: ${(e as Error).message}` };
  }
}

/**
 * A shed over the job cache's banks (shedUnowned, here) and the minion banks (`minions/data`, `minions/mine`:
 * `minionShed`, which the Raft worker runs, since it asks each record's owners whether they hold it: never the
 * only copy), with the same refusals first (ownership), and one result: counts summed, `kept_sole_copy` for the
 * minion banks, the first error or the skip reasons. The subbank applies when the first bank is a job bank, as
 * Salt applies it to the first bank's keys.
 */
export async function shedBanks(store: Store, a: ShedArgs, ownership: ShedOwnership, minionShed: (bank: MinionBank) => Promise<MinionShedAnswer>): Promise<ShedResult> {
  const minionBanks = a.banks.filter((b) => b in MINION_BANK_NAMES);
  if (minionBanks.length === 0) return shedUnowned(store, a, ownership);
  if ("skip" in ownership) return empty(a, "skipped", { reason: ownership.skip });
  const jobBanks = a.banks.filter((b) => !(b in MINION_BANK_NAMES));
  const parts: ShedResult[] = [];
  if (jobBanks.length > 0) {
    const r = await shedUnowned(store, { ...a, banks: jobBanks, subbankTemplate: a.banks[0] === jobBanks[0] ? a.subbankTemplate : null }, ownership);
    if (r.status === "error") return r;
    parts.push(r);
  } else if (a.driver !== null && a.driver !== "lmdb") return empty(a, "error", { error: `driver ${a.driver}: brine's job cache is its LMDB store (driver None)` });
  let sole = 0;
  for (const b of minionBanks) {
    const m = await minionShed(MINION_BANK_NAMES[b]!);
    sole += m.kept_sole_copy;
    parts.push({ status: m.status, ring: a.ring, dropped: m.dropped, kept: m.kept, subbanks_dropped: 0, dry_run: a.dryRun, ...(m.reason !== undefined ? { reason: `${b}: ${m.reason}` } : {}) });
  }
  const ok = parts.some((p) => p.status === "ok");
  const reasons = parts.filter((p) => p.reason !== undefined).map((p) => p.reason!);
  return {
    status: ok ? "ok" : "skipped",
    ring: a.ring,
    dropped: parts.reduce((n, p) => n + p.dropped, 0),
    kept: parts.reduce((n, p) => n + p.kept, 0),
    subbanks_dropped: parts.reduce((n, p) => n + p.subbanks_dropped, 0),
    dry_run: a.dryRun,
    kept_sole_copy: sole,
    ...(reasons.length > 0 ? { reason: reasons.join("; ") } : {}),
  };
}
