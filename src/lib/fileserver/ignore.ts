/**
 * `file_ignore_regex` / `file_ignore_glob` (Salt's `salt.fileserver.is_file_ignored`): a regex matches
 * anywhere in the name (Python `re.search`), a glob must match the whole name (`fnmatch`, where `*`
 * also crosses `/`). Salt tests the relative path when listing and the full path when finding a file;
 * brine ignores a file when either matches, so a file left out of the lists is never served either.
 */
import { getLogger } from "../../shared/log.js";
import { compilePcre } from "../targeting/pcre.js";
import { fnmatchToRegExp } from "../targeting/fnmatch.js";

const log = getLogger("brine.fileserver");

/** Most ignore patterns honoured (each is tested against every listed path). */
export const ignorePatternsMax = 256;

const LEADING_FLAGS = /^\(\?[aiLmsux]+\)/;

function asList(v: unknown): string[] {
  if (typeof v === "string") return [v];
  if (Array.isArray(v)) return v.filter((x): x is string => typeof x === "string");
  return [];
}

/** Python `re.search` as a JS RegExp: the pattern may start anywhere after position 0. */
function searchRegex(pattern: string): RegExp | null {
  const flags = LEADING_FLAGS.exec(pattern)?.[0] ?? "";
  return compilePcre(`${flags}[\\s\\S]*?(?:${pattern.slice(flags.length)})`);
}

export class IgnoreRules {
  private readonly regexes: RegExp[] = [];
  private readonly globs: RegExp[] = [];

  constructor(regexOpt: unknown, globOpt: unknown) {
    for (const r of asList(regexOpt).slice(0, ignorePatternsMax)) {
      const re = searchRegex(r);
      if (re) this.regexes.push(re);
      else log.error(`file_ignore_regex: pattern ${JSON.stringify(r)} is not a valid regular expression; ignored`);
    }
    for (const g of asList(globOpt).slice(0, ignorePatternsMax)) this.globs.push(fnmatchToRegExp(g));
  }

  get empty(): boolean {
    return this.regexes.length === 0 && this.globs.length === 0;
  }

  ignored(name: string): boolean {
    for (const re of this.regexes) if (re.test(name)) return true;
    for (const re of this.globs) if (re.test(name)) return true;
    return false;
  }
}
