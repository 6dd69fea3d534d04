/**
 * manage.* runners: who answers a ping (status, up, down, versions: a job is sent) and who is connected by
 * presence detection (present, list_state and Salt's aliases of it: alived, allowed, joined, reaped, and
 * their not_* forms: no job is sent).
 */
import os from "node:os";
import { argOf, presenceGrainsOf, type RunnerContext, type RunnerFn } from "./context.js";
import { clusterPresent, peerAddresses, presenceMode } from "../workers/req-handler/presence.js";
import { SALT_VERSION_SPOKEN } from "../lib/client/version.js";

/** The Salt version this master reports for itself (manage.versions), the one it speaks (src/lib/client/version.ts). */
export const MASTER_SALT_VERSION = SALT_VERSION_SPOKEN;

async function ping(ctx: RunnerContext, timeoutS: number): Promise<{ up: string[]; down: string[] }> {
  const up = new Set<string>();
  for await (const r of ctx.client.cmdIter({ tgt: "*", fun: "test.ping", timeoutS }, { gatherJobTimeoutS: ctx.cfg.gather_job_timeout })) {
    if (!("missing" in r)) up.add(r.id);
  }
  const accepted = ctx.keys.list("accepted");
  return { up: accepted.filter((m) => up.has(m)), down: accepted.filter((m) => !up.has(m)) };
}

const timeoutOf = (ctx: RunnerContext, arg: unknown[], kwarg: Record<string, unknown>) => Number(argOf(arg, kwarg, 0, "timeout", ctx.cfg.timeout));

/** Minions connected to this master or, clustered, to any master (presence.ts; no job is sent). */
async function present(ctx: RunnerContext): Promise<string[]> {
  const accepted = ctx.keys.list("accepted");
  return clusterPresent(ctx.cfg, ctx.minions.store, accepted, await presenceGrainsOf(ctx, accepted));
}

/** Salt's `subset`: a list of ids, or a comma-separated string of them; undefined: every minion. */
function subsetOf(arg: unknown[], kwarg: Record<string, unknown>): Set<string> | undefined {
  const s = argOf(arg, kwarg, 0, "subset", null);
  if (s === null || s === undefined || s === "") return undefined;
  return new Set((Array.isArray(s) ? s : String(s).split(",")).map((x) => String(x).trim()).filter(Boolean));
}

const showIpOf = (arg: unknown[], kwarg: Record<string, unknown>) => {
  const v = argOf(arg, kwarg, 1, "show_ip", false);
  return v === true || v === "True" || v === "true";
};

/**
 * Salt's connected_ids addresses: the peers of the publish port, a loopback peer standing for every
 * non-loopback address of this host (a minion on the master's host).
 */
function publishPeers(port: number): Set<string> {
  const addrs = peerAddresses(port);
  for (const [lo, family] of [["127.0.0.1", "IPv4"], ["::1", "IPv6"]] as const) {
    if (!addrs.delete(lo)) continue;
    for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) if (!a.internal && a.family === family) addrs.add(a.address);
  }
  return addrs;
}

/**
 * The address each present minion is seen from, for `show_ip`: with `connections` presence the first cached
 * ipv4 (then ipv6) grain among the publish port's peers (Salt's answer); otherwise (`heard`, or through a
 * balancer) the minion's first non-loopback ipv4 grain.
 */
function addressOf(grainsOf: (id: string) => Record<string, unknown> | undefined, id: string, peers: Set<string> | undefined): string {
  const g = grainsOf(id) ?? {};
  const ips = [...(Array.isArray(g.ipv4) ? g.ipv4 : []), ...(Array.isArray(g.ipv6) ? g.ipv6 : [])].filter((x): x is string => typeof x === "string");
  return (peers && ips.find((ip) => peers.has(ip))) ?? ips.find((ip) => ip !== "127.0.0.1" && ip !== "::1") ?? ips[0] ?? "";
}

/** list_state(subset, show_ip): present minions, sorted; with show_ip a {id: address} map. */
async function listState(ctx: RunnerContext, arg: unknown[], kwarg: Record<string, unknown>): Promise<string[] | Record<string, string>> {
  const subset = subsetOf(arg, kwarg);
  const ids = (await present(ctx))
    .filter((id) => !subset || subset.has(id))
    .sort();
  if (!showIpOf(arg, kwarg)) return ids;
  const peers = presenceMode(ctx.cfg) === "connections" ? publishPeers(ctx.cfg.publish_port) : undefined;
  const grainsOf = await presenceGrainsOf(ctx, ids);
  return Object.fromEntries(ids.map((id) => [id, addressOf(grainsOf, id, peers)]));
}

/** list_not_state(subset): accepted minions that are not present (in key order). */
async function listNotState(ctx: RunnerContext, arg: unknown[], kwarg: Record<string, unknown>): Promise<string[]> {
  const subset = subsetOf(arg, kwarg);
  const p = new Set(await present(ctx));
  return ctx.keys.list("accepted").filter((m) => !p.has(m) && (!subset || subset.has(m)));
}

/** A Salt version as SaltStackVersion orders it: major, minor, bugfix, mbugfix, release after rc, rc number, commits since. */
export function versionKey(v: string): number[] | null {
  const m = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:\.(\d+))?(?:(rc)(\d+))?(?:[+-](\d+)(?:[.-]g?[0-9a-f]+)?)?/.exec(v.trim());
  if (!m) return null;
  const n = (x: string | undefined) => (x === undefined ? 0 : Number(x));
  return [n(m[1]), n(m[2]), n(m[3]), n(m[4]), m[5] ? 0 : 1, n(m[6]), n(m[7])];
}

function cmpVersion(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d) return d < 0 ? -1 : 1;
  }
  return 0;
}

const VERSION_LABELS: Record<number, string> = { [-2]: "Minion offline", [-1]: "Minion requires update", 0: "Up to date", 1: "Minion newer than master" };

/**
 * versions(): test.version on every minion, grouped as Salt labels them against the master's version;
 * a minion that did not answer, or failed, is {id: False} under "Minion offline"; "Master" is the master's version.
 */
const versions: RunnerFn = async (ctx) => {
  const master = versionKey(MASTER_SALT_VERSION)!;
  const byDiff = new Map<number, Record<string, string | false>>();
  for await (const r of ctx.client.cmdIter({ tgt: "*", fun: "test.version", timeoutS: ctx.cfg.timeout }, { gatherJobTimeoutS: ctx.cfg.gather_job_timeout })) {
    let diff = -2;
    let shown: string | false = false;
    if (!("missing" in r) && !Number(r.data.retcode ?? 0)) {
      const key = versionKey(String(r.data.return));
      if (key) {
        diff = cmpVersion(key, master);
        shown = String(r.data.return);
      }
    }
    let group = byDiff.get(diff);
    if (!group) byDiff.set(diff, (group = {}));
    group[r.id] = shown;
  }
  const ret: Record<string, unknown> = {};
  for (const [diff, group] of byDiff) ret[VERSION_LABELS[diff]!] = Object.fromEntries(Object.keys(group).sort().map((id) => [id, group[id]]));
  ret.Master = MASTER_SALT_VERSION;
  return ret;
};

const stateList: RunnerFn = async (ctx, arg, kwarg) => listState(ctx, arg, kwarg);
const notStateList: RunnerFn = async (ctx, arg, kwarg) => listNotState(ctx, arg, kwarg);

export const manageRunners: Record<string, RunnerFn> = {
  "manage.status": async (ctx, arg, kwarg) => ping(ctx, timeoutOf(ctx, arg, kwarg)),
  "manage.up": async (ctx, arg, kwarg) => (await ping(ctx, timeoutOf(ctx, arg, kwarg))).up,
  "manage.down": async (ctx, arg, kwarg) => (await ping(ctx, timeoutOf(ctx, arg, kwarg))).down,
  "manage.versions": versions,
  // Salt 3007: present, alived, allowed, joined and reaped are all list_state (the same for their not_ forms)
  ...Object.fromEntries(["list_state", "present", "alived", "allowed", "joined", "reaped"].map((n) => [`manage.${n}`, stateList])),
  ...Object.fromEntries(["list_not_state", "not_present", "not_alived", "not_allowed", "not_joined", "not_reaped"].map((n) => [`manage.${n}`, notStateList])),
};
