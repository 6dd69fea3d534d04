/**
 * Salt's highstate outputter (salt/output/highstate.py): state returns laid out per state with a summary
 * per minion; the default for state functions (their returns name it as `out`). Settings: state_output
 * (full, terse, mixed, changes, filter, and their *_id forms), state_verbose, state_output_diff,
 * state_output_profile, state_output_pct, state_tabular, state_compress_ids.
 */
import { getColors, stripEsc, type Colors } from "./color.js";
import { nested } from "./nested.js";
import type { OutOpts } from "./opts.js";
import { isIntNumber, pformat, pyStr, reprFloat, splitLines } from "./pyrepr.js";

type Rec = Record<string, unknown>;

function isMap(v: unknown): v is Rec {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** Python truthiness of a decoded value. */
export function truthy(v: unknown): boolean {
  if (v === null || v === undefined || v === false || v === 0 || v === "" || v === 0n) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof Uint8Array) return v.length > 0;
  if (isMap(v)) return Object.keys(v).length > 0;
  return true;
}

/** Python str() of a result value (True, False, None, text). */
function str(v: unknown): string {
  return pyStr(v);
}

/** Python float() of a duration as the outputter parses it ("12.5 ms" too); undefined when it cannot. */
function durationOf(v: unknown): number | undefined {
  if (typeof v === "number") return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  const s = String(v ?? "").trim();
  const n = Number(s);
  if (s !== "" && Number.isFinite(n)) return n;
  const ms = s.split(" ms")[0]!.trim();
  const m = Number(ms);
  return ms !== "" && Number.isFinite(m) ? m : undefined;
}

/** Python's str() of a float (75.0, 12.5). */
function pyFloat(x: number): string {
  return reprFloat(x);
}

/** Python's format of a number as `{x}` would print it. */
function num(v: unknown): string {
  return typeof v === "number" && !isIntNumber(v) ? reprFloat(v) : str(v);
}

function pyRound(x: number, nd: number): number {
  const f = 10 ** nd;
  return Math.round(x * f) / f;
}

/** textwrap.TextWrapper(width, initial_indent, subsequent_indent).fill(text) for plain words. */
function wrapFill(text: string, width: number, indent: string): string {
  const words = text.split(/\s+/).filter(Boolean);
  const lines: string[] = [];
  let cur = "";
  for (const w of words) {
    if (cur && indent.length + cur.length + 1 + w.length > width) {
      lines.push(indent + cur);
      cur = w;
    } else cur = cur ? cur + " " + w : w;
  }
  if (cur) lines.push(indent + cur);
  return lines.join("\n");
}

function compressIds(data: unknown): unknown {
  if (!isMap(data)) return data;
  try {
    const compressed: Record<string, Rec> = {};
    for (const [host, hostdata] of Object.entries(data)) {
      const hd = hostdata as Record<string, Rec>;
      compressed[host] = {};
      const key = (tname: string, info: Rec) => [tname.split("_|-")[0], str(info.__id__), str(info.__sls__), str(info.result)].join("_");
      const count = new Map<string, number>();
      for (const [tname, info] of Object.entries(hd)) count.set(key(tname, info), (count.get(key(tname, info)) ?? 0) + 1);
      for (const [tname0, info] of Object.entries(hd)) {
        const comps = tname0.split("_|-");
        const n = count.get(key(tname0, info))!;
        if (n === 1) {
          compressed[host]![tname0] = info;
          continue;
        }
        comps[2] = ["state_compressed", str(info.__sls__), str(info.__id__), str(info.result)].join("_");
        comps[1] = `${str(info.__id__)} (${n})`;
        const tname = comps.join("_|-");
        const cur = compressed[host]![tname] as Rec | undefined;
        if (!cur) {
          compressed[host]![tname] = info;
          continue;
        }
        cur.__run_num__ = Math.min(Number(info.__run_num__), Number(cur.__run_num__));
        // a float Salt computes here (19.0): kept as its Python text so it prints as Python prints it
        cur.duration = reprFloat(pyRound(Number(durationOf(info.duration) ?? 0) + Number(durationOf(cur.duration) ?? 0), 3));
        cur.start_time = [String(info.start_time), String(cur.start_time)].sort()[0];
        if (truthy(cur.changes) && truthy(info.changes)) {
          const ch = cur.changes as Rec;
          if (!truthy(ch["compressed changes"])) cur.changes = { "compressed changes": { [String(cur.name)]: cur.changes } };
          (cur.changes as Record<string, Rec>)["compressed changes"]![String(info.name)] = info.changes;
        } else if (truthy(info.changes)) {
          cur.changes = { "compressed changes": { [String(info.name)]: info.changes } };
        }
      }
    }
    return compressed;
  } catch {
    return data;
  }
}

/** The outputter's entry: `data` is {minion: state returns} (or an orchestration's envelope). */
export function highstate(data0: unknown, opts: OutOpts, indentLevel = 1): string {
  let data = data0;
  if (isMap(data) && "return" in data) data = data.return;
  if (isMap(data) && "data" in data) data = data.data;
  if (isMap(data) && Object.keys(data).length === 1) {
    const inner = Object.values(data)[0];
    if (isMap(inner) && "jid" in inner && "fun" in inner) {
      const r = inner.return;
      data = isMap(r) && "data" in r ? r.data : data;
    }
  }
  if (typeof data === "string") return data;
  // Salt returns an int as it is and its CLI then falls back to the nested outputter
  if (typeof data === "number" || typeof data === "boolean" || typeof data === "bigint") throw new TypeError("not a highstate return");
  if (data === null || data === undefined) return "None";
  if (!isMap(data)) throw new TypeError("not a highstate return");
  const masters = Object.keys(data).filter((k) => k.endsWith("_master"));
  if ("retcode" in data && masters.length === 1) {
    const { retcode: _r, ...rest } = data;
    data = rest;
  }
  if (opts.state_compress_ids) data = compressIds(data);
  const out = Object.entries(data as Rec).map(([host, hostdata]) => formatHost(host, hostdata, opts, indentLevel)[0]);
  return out.join("\n");
}

function formatHost(host: string, data: unknown, opts: OutOpts, indentLevel = 1): [string, boolean] {
  const colors = getColors(opts.color);
  const tabular = opts.state_tabular ?? false;
  const rcounts = new Map<unknown, number>();
  const rdurations: number[] = [];
  const pdurations: number[] = [];
  let hcolor = colors.GREEN!;
  const hstrs: string[] = [];
  let nchanges = 0;
  const strip = opts.strip_colors ?? true;
  const E = colors.ENDC!;

  if (typeof data === "number" || typeof data === "bigint" || typeof data === "boolean") {
    // a Python bool is an int here
    nchanges = 1;
    hstrs.push(`${hcolor}    ${str(data)}${E}`);
    hcolor = colors.CYAN!;
  } else if (typeof data === "string") {
    nchanges = 1;
    for (const line of splitLines(data)) hstrs.push(`${hcolor}    ${line}${E}`);
    hcolor = colors.CYAN!;
  } else if (Array.isArray(data)) {
    hcolor = colors.LIGHT_RED!;
    hstrs.push(`    ${hcolor}Data failed to compile:${E}`);
    for (let err of data) {
      if (strip) err = stripEsc(str(err));
      hstrs.push(`${hcolor}----------\n    ${str(err)}${E}`);
    }
  } else if (isMap(data)) {
    const tmp: Record<string, Rec> = {};
    for (const [tname, info] of Object.entries(data)) {
      if (isMap(info) && tname !== "changes" && truthy(info) && !("__run_num__" in info)) {
        hstrs.unshift(pformat(info));
        hstrs.unshift("The State execution failed to record the order in which all states were executed. The state return missing data is:");
      }
      if (isMap(info) && "result" in info) tmp[tname] = info;
    }
    const names = Object.keys(tmp).sort((a, b) => Number(tmp[a]!.__run_num__ ?? 0) - Number(tmp[b]!.__run_num__ ?? 0));
    for (const tname of names) {
      const ret = tmp[tname]!;
      // a state return without these is not one: Salt's KeyError sends the CLI to the nested outputter
      if (!("changes" in ret) || !("comment" in ret)) throw new TypeError(`state ${tname} has no changes or comment`);
      const result = ret.result;
      if (!rcounts.has(result)) rcounts.set(result, 0);
      let compressedCount = 1;
      if (opts.state_compress_ids && tname.includes("_|-state_compressed_")) {
        const id = tname.split("_|-")[1] ?? "";
        const m = /\((\d+)\)$/.exec(id);
        if (m) compressedCount = Number(m[1]);
      }
      rcounts.set(result, rcounts.get(result)! + compressedCount);
      const d = durationOf(ret.duration ?? 0);
      if ("__parallel__" in ret) {
        if (d !== undefined) pdurations.push(d);
      } else if (d !== undefined) rdurations.push(d);

      let tcolor = colors.GREEN!;
      let schanged: boolean;
      let ctext: string;
      if (["state.orch", "state.orchestrate", "state.sls"].includes(ret.name as string)) {
        const inner = highstateOrNested(ret.changes, opts, indentLevel + 1);
        ctext = ("\n" + inner).replace(/^/gm, " ".repeat(14 * indentLevel));
        schanged = true;
        nchanges += 1;
      } else {
        [schanged, ctext] = formatChanges(ret.changes, opts);
        if (schanged && compressedCount > 1) {
          const cc = isMap(ret.changes) ? ret.changes["compressed changes"] : undefined;
          nchanges += (isMap(cc) ? Object.keys(cc).length : 0) || 1;
        } else nchanges += schanged ? 1 : 0;
      }
      if (opts.state_output_diff && truthy(result) && !schanged) continue;
      if (!(opts.state_verbose ?? true) && truthy(result) && !schanged) continue;
      if (schanged) tcolor = colors.CYAN!;
      if (result === false) {
        hcolor = colors.RED!;
        tcolor = colors.RED!;
      }
      if (result === null || result === undefined) {
        hcolor = colors.LIGHT_YELLOW!;
        tcolor = colors.LIGHT_YELLOW!;
      }
      const stateOutput = (opts.state_output ?? "full").toLowerCase();
      const comps = tname.split("_|-");
      if (stateOutput.endsWith("_id")) comps[2] = comps[1]!;
      if (stateOutput.startsWith("filter")) {
        let clikw: Rec = {};
        for (const item of opts.arg ?? []) if (isMap(item) && "__kwarg__" in item) clikw = { ...item };
        let exclude = (clikw.exclude ?? opts.state_output_exclude ?? []) as unknown;
        if (typeof exclude === "string") exclude = exclude.split(",");
        let terse = (clikw.terse ?? opts.state_output_terse ?? []) as unknown;
        if (typeof terse === "string") terse = terse.split(",");
        if (Array.isArray(terse) && terse.includes(str(result))) {
          hstrs.push(formatTerse(tcolor, comps, ret, colors, tabular, opts));
          continue;
        }
        if (Array.isArray(exclude) && exclude.includes(str(result))) continue;
      } else if (
        stateOutput.startsWith("terse") ||
        (stateOutput.startsWith("mixed") && result !== false) ||
        (stateOutput.startsWith("changes") && truthy(result) && !schanged)
      ) {
        hstrs.push(formatTerse(tcolor, comps, ret, colors, tabular, opts));
        continue;
      }
      const lines: string[] = [
        `${tcolor}----------${E}`,
        `    ${tcolor}      ID: ${comps[1]}${E}`,
        `    ${tcolor}Function: ${comps[0]}.${comps[3]}${E}`,
        `    ${tcolor}  Result: ${str(result)}${E}`,
      ];
      let comment: string;
      const rc = ret.comment;
      if (Array.isArray(rc)) {
        // Salt calls list.join(" ") here, which fails, then prints str(list)
        comment = str(rc).trim().replaceAll("\n", "\n" + " ".repeat(14));
      } else {
        comment = str(rc ?? null).trim().replaceAll("\n", "\n" + " ".repeat(14));
      }
      if ("data" in ret) {
        const dv = ret.data;
        if (Array.isArray(dv)) for (const item of dv) comment = `${comment} ${str(item)}`;
        else if (isMap(dv)) for (const [k, v] of Object.entries(dv)) comment = `${comment}\n\t\t${k}: ${str(v)}`;
        else comment = `${comment} ${str(dv)}`;
      }
      lines.push(`    ${tcolor} Comment: ${comment}${E}`);
      if ((opts.state_output_profile ?? true) && "start_time" in ret) {
        const dur = ret.duration === undefined || ret.duration === "" ? "" : `${num(ret.duration)} ms`;
        lines.push(`    ${tcolor} Started: ${str(ret.start_time)}${E}`, `    ${tcolor}Duration: ${dur}${E}`);
      }
      if (comps[1] !== comps[2]) lines.splice(3, 0, `    ${tcolor}    Name: ${comps[2]}${E}`);
      hstrs.push(...lines);
      hstrs.push(`${tcolor}     Changes:   ${ctext}${E}`);
      if ("warnings" in ret) {
        rcounts.set("warnings", (rcounts.get("warnings") ?? 0) + 1);
        const w = Array.isArray(ret.warnings) ? ret.warnings.map(str).join("\n") : str(ret.warnings);
        hstrs.push(`   ${colors.LIGHT_RED} Warnings: ${wrapFill(w, 80, " ".repeat(14)).trimStart()}${E}`);
      }
    }
    summary(host, rcounts, nchanges, rdurations, pdurations, hstrs, colors, opts);
  }
  if (strip) host = stripEsc(host);
  hstrs.unshift(`${hcolor}${host}:${E}`);
  return [hstrs.join("\n"), nchanges > 0];
}

function summary(host: string, rcounts: Map<unknown, number>, nchanges: number, rdurations: number[], pdurations: number[], hstrs: string[], colors: Colors, opts: OutOpts): void {
  const E = colors.ENDC!;
  const labels = ["Succeeded", "Failed", "Not Run", "Warnings"];
  const countMax = Math.max(0, ...[...rcounts.values()].map((x) => String(x).length));
  const labelMax = Math.max(...labels.map((x) => x.length));
  const lineMax = labelMax + countMax + 2;
  const get = (k: unknown) => rcounts.get(k) ?? 0;
  const counts = (label: string, count: string | number) => `${label}: ${String(count).padStart(lineMax - (label.length + 2))}`;
  hstrs.push(`${colors.CYAN}\nSummary for ${host}\n${"-".repeat(lineMax)}${E}`);
  const changestats: string[] = [];
  if (rcounts.has(null) && get(null) > 0) changestats.push(`${colors.LIGHT_YELLOW}unchanged=${get(null)}${E}`);
  if (nchanges > 0) changestats.push(`${colors.GREEN}changed=${nchanges}${E}`);
  const cs = changestats.length ? ` (${changestats.join(", ")})` : "";
  hstrs.push(`${colors.GREEN}${counts("Succeeded", get(true) + get(null))}${E}` + cs);
  const failed = get(false);
  hstrs.push(`${failed ? colors.RED : colors.CYAN}${counts("Failed", failed)}${E}`);
  let total = 0;
  for (const v of rcounts.values()) total += v;
  total -= get("warnings");
  if (opts.state_output_pct && total !== 0) {
    hstrs.push(`${colors.GREEN}${counts("Success %", pyFloat(pyRound(((get(true) + get(null)) / total) * 100, 2)))}${E}`);
    hstrs.push(`${failed ? colors.RED : colors.CYAN}${counts("Failure %", pyFloat(pyRound((failed / total) * 100, 2)))}${E}`);
  }
  if (get("warnings")) hstrs.push(`${colors.LIGHT_RED}${counts("Warnings", get("warnings"))}${E}`);
  hstrs.push(`${colors.CYAN}${"-".repeat(lineMax)}\nTotal states run: ${String(total).padStart(lineMax - 7)}${E}`);
  if (opts.state_output_profile ?? true) {
    let sum = rdurations.reduce((a, b) => a + b, 0);
    if (pdurations.length) sum += Math.max(...pdurations);
    let unit = "ms";
    if (sum > 999) {
      sum /= 1000;
      unit = "s";
    }
    hstrs.push(`${colors.CYAN}Total run time: ${sum.toFixed(3).padStart(lineMax - 5)} ${unit}${E}`);
  }
}

/** A nested orchestration's changes: the highstate layout when they are state returns, else what Salt falls back to. */
function highstateOrNested(data: unknown, opts: OutOpts, indentLevel: number): string {
  try {
    return highstate(data, opts, indentLevel);
  } catch {
    return nested(data, opts);
  }
}

function nestedChanges(changes: unknown, opts: OutOpts): string {
  return "\n" + nested(changes, opts, { nested_indent: 14 }).trimEnd();
}

function formatChanges(changes: unknown, opts: OutOpts): [boolean, string] {
  if (!truthy(changes)) return [false, ""];
  if (!isMap(changes)) return [true, `Invalid Changes data: ${str(changes)}`];
  const ret = changes.ret;
  if (ret !== null && ret !== undefined && changes.out === "highstate" && isMap(ret)) {
    let ctext = "";
    let changed = false;
    for (const [host, hostdata] of Object.entries(ret)) {
      const [s, c] = formatHost(host, hostdata, opts);
      ctext += "\n" + splitLines(s).map((l) => " ".repeat(14) + l).join("\n");
      changed = changed || c;
    }
    return [changed, ctext];
  }
  return [true, nestedChanges(changes, opts)];
}

function pad(s: string, width: number, align: "<" | ">"): string {
  return align === ">" ? s.padStart(width) : s.padEnd(width);
}

function formatTerse(tcolor: string, comps: string[], ret: Rec, colors: Colors, tabular: boolean | string, opts: OutOpts): string {
  let result = "Clean";
  if (truthy(ret.changes)) result = "Changed";
  if (ret.result === false) result = "Failed";
  else if (ret.result === null || ret.result === undefined) result = "Differs";
  const profile = (opts.state_output_profile ?? true) && "start_time" in ret;
  const warnings = "warnings" in ret ? (Array.isArray(ret.warnings) ? ret.warnings.map(str).join("\n") : str(ret.warnings)) : undefined;
  const fun = comps[comps.length - 1]!;
  if (tabular === true) {
    let s = warnings !== undefined ? `${colors.LIGHT_RED}Warnings:\n${warnings}${colors.ENDC}\n` : "";
    s += tcolor;
    if (profile) s += `${str(ret.start_time)} [${pad(num(ret.duration), 7, ">")} ms] `;
    s += `${pad(comps[0]!, 10, ">")}.${pad(fun, 10, "<")} ${pad(result, 7, "<")}   Name: ${comps[2]}${colors.ENDC}`;
    return s;
  }
  if (typeof tabular === "string") {
    // a custom format string: Python's str.format with positional fields 0-5
    const vals = [tcolor, comps[2]!, comps[0]!, fun, result, colors.ENDC!];
    return tabular.replace(/\{(\d)\}/g, (_m, i: string) => vals[Number(i)] ?? "");
  }
  let s = warnings !== undefined ? `${colors.LIGHT_RED}Warnings:\n${warnings}${colors.ENDC}` : "";
  s += ` ${tcolor} Name: ${comps[2]} - Function: ${comps[0]}.${fun} - Result: ${result}`;
  if (profile) s += ` - Started: ${str(ret.start_time)} - Duration: ${num(ret.duration)} ms`;
  return s + colors.ENDC;
}
