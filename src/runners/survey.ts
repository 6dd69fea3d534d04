/**
 * survey.hash and survey.diff (Salt's salt/runners/survey.py): publish one job through the runner's local
 * client (as manage.up does), group the minions by the Python str() of what they returned (hashed with
 * sha256), and list the groups ("pools") largest first (`survey_sort=up`: smallest first). A targeted minion
 * that did not return counts as False, as Salt's LocalClient.cmd reports it.
 *
 * Calling form: survey.hash <tgt> <function> [args…] [key=value…] [survey_sort=up|down] [tgt_type=compound|pcre];
 * the other keyword arguments (not starting with `_`) go to the function. survey.diff also prints each pool
 * and a unified diff (no context lines) of its result against the first pool's.
 */
import { createHash } from "node:crypto";
import { pyStr } from "../lib/targeting/pystr.js";
import type { RunnerContext, RunnerFn } from "./context.js";

export interface Pool {
  pool: string[];
  result: string;
}

async function poolResults(ctx: RunnerContext, arg: unknown[], kwarg: Record<string, unknown>): Promise<Pool[]> {
  if (arg.length < 2) throw new Error("survey needs a target and a function: survey.hash <tgt> <function> [args...]");
  const [tgt, fun, ...rest] = arg;
  // `timeout` is salt-run's -t (Salt's opts["timeout"]), not the function's
  const { survey_sort: sort = "down", tgt_type: tt = "compound", timeout, ...others } = kwarg;
  const timeoutS = Number(timeout ?? ctx.cfg.timeout);
  const tgtType = tt === "pcre" ? "pcre" : "compound";
  const passthru = Object.fromEntries(Object.entries(others).filter(([k]) => !k.startsWith("_")));
  const args = Object.keys(passthru).length ? [...rest, { ...passthru, __kwarg__: true }] : rest;
  const returns: Record<string, unknown> = {};
  for await (const r of ctx.client.cmdIter({ tgt: String(tgt), fun: String(fun), arg: args, tgtType, timeoutS }, { gatherJobTimeoutS: ctx.cfg.gather_job_timeout })) {
    returns[r.id] = "missing" in r ? false : r.data.return;
  }
  return groupPools(returns, sort !== "up");
}

/** Pools of minions with equal str() results, in Salt's order (largest first when `down`; ties keep first-seen order). */
export function groupPools(returns: Record<string, unknown>, down = true): Pool[] {
  const byDigest = new Map<string, Pool>();
  for (const id of Object.keys(returns).sort()) {
    const text = pyStr(returns[id]);
    const digest = createHash("sha256").update(text, "utf8").digest("hex");
    let p = byDigest.get(digest);
    if (!p) byDigest.set(digest, (p = { pool: [], result: text }));
    p.pool.push(id);
  }
  // Python's sorted(ret, key=pool size, reverse=…) over the digests in first-seen order: stable, ties keep that order
  const digests = [...byDigest.keys()];
  const pools = digests.map((d) => byDigest.get(d)!);
  return pools.map((p, i) => ({ p, i })).sort((a, b) => (down ? b.p.pool.length - a.p.pool.length : a.p.pool.length - b.p.pool.length) || a.i - b.i).map((x) => x.p);
}

/** difflib.unified_diff(a, b, fromfile, tofile, n=0) over lines (each ending in "\n"). */
export function unifiedDiff(a: string[], b: string[], fromfile: string, tofile: string): string {
  // longest common subsequence table, then walk it into change blocks
  const m = a.length;
  const n = b.length;
  const lcs: number[][] = Array.from({ length: m + 1 }, () => new Array<number>(n + 1).fill(0));
  for (let i = m - 1; i >= 0; i--) for (let j = n - 1; j >= 0; j--) lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  const hunks: string[] = [];
  let i = 0;
  let j = 0;
  while (i < m || j < n) {
    if (i < m && j < n && a[i] === b[j]) {
      i++;
      j++;
      continue;
    }
    const i0 = i;
    const j0 = j;
    while ((i < m || j < n) && !(i < m && j < n && a[i] === b[j])) {
      if (j >= n || (i < m && lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) i++;
      else j++;
    }
    const range = (start: number, stop: number) => {
      const len = stop - start;
      if (len === 1) return `${start + 1}`;
      return `${len ? start + 1 : start},${len}`;
    };
    hunks.push(`@@ -${range(i0, i)} +${range(j0, j)} @@\n${a.slice(i0, i).map((l) => `-${l}`).join("")}${b.slice(j0, j).map((l) => `+${l}`).join("")}`);
  }
  return hunks.length ? `--- ${fromfile}\n+++ ${tofile}\n${hunks.join("")}` : "";
}

/** Python's str.splitlines() with "\n" put back on each line. */
function lines(s: string): string[] {
  const parts = s.split(/\r\n|\r|\n/);
  if (parts[parts.length - 1] === "") parts.pop();
  return parts.map((l) => `${l}\n`);
}

const diff: RunnerFn = async (ctx, arg, kwarg) => {
  const pools = await poolResults(ctx, arg, kwarg);
  pools.forEach((k, idx) => {
    ctx.print(`minion pool :\n------------\n${pyStr(k.pool)}\npool size :\n----------\n    ${k.pool.length}`);
    if (idx === 0) {
      ctx.print(`pool result :\n------------\n    ${k.result}\n`);
      return;
    }
    const head = `differences from "${pools[0]!.pool[0]}" results :`;
    ctx.print(`${head}\n${"-".repeat(head.length - 1)}`);
    ctx.print(`${unifiedDiff(lines(pools[0]!.result), lines(k.result), pools[0]!.pool[0]!, k.pool[0]!)}\n`);
  });
  return pools;
};

export const surveyRunners: Record<string, RunnerFn> = {
  "survey.hash": async (ctx, arg, kwarg) => poolResults(ctx, arg, kwarg),
  "survey.diff": diff,
};
