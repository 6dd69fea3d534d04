/**
 * Salt's wheel `key` module (salt/wheel/key.py over salt/key.py's Key class): list, accept, reject, delete,
 * print and fingerprint minion keys, generate key pairs. Minion keys are read where salt-key and the request
 * workers read them (`minionPkiDir`: cluster_pki_dir under clustering), and every change goes through the
 * same code as salt-key's (src/lib/pki/key-actions.ts).
 *
 * A changed key: `salt/key` {result, act, id} through `ctx.fire` and "<act>:<id>" through `ctx.note`, once per
 * key actually moved or removed (Salt fires only when the move or removal succeeded). A delete or reject that
 * changed something writes the AES rotation drop file when `rotate_aes_key` (Salt writes it even when nothing
 * matched; a rotation re-keys every minion, so brine skips it when nothing changed).
 *
 * Differences from Salt, on purpose:
 * - `*_dict` variants only act on the four key directories and on valid minion ids (Salt joins whatever the
 *   caller sent onto pki_dir, so `delete_dict({"../..": ["x"]})` reached outside it);
 * - `gen` never writes to pki_dir (Salt writes the pair there and deletes it; with `id_` "master" it returned
 *   and then deleted the master's own key);
 * - `gen_accept` fires `salt/key` accept (Salt writes the file silently) so reactors and caches see the key;
 * - `keysize` above keysizeMax is refused (a 16384-bit key takes minutes of CPU).
 */
import { readFileSync } from "node:fs";
import { getHashes } from "node:crypto";
import path from "node:path";
import { KEY_DIRS, keyStoreFor, type KeyStore, type KeyState } from "../pki/key-store.js";
import {
  KEY_EVENT_TAG,
  applyKeyAct,
  fileFinger,
  isRsaPublicKeyPem,
  keyEventData,
  localKeyFiles,
  matchKeys,
  minionKeyFinger,
  sortedIgnoreCase,
  writeDropFile,
  type KeyAct,
} from "../pki/key-actions.js";
import { generateRsaPemAsync } from "../pki/master-keys.js";
import { fnmatchFilter, fnmatchToRegExp } from "../targeting/index.js";
import { validId } from "../../shared/protocol/ids.js";
import { pemFinger } from "../../shared/protocol/pem.js";
import { getLogger } from "../../shared/log.js";
import type { WheelContext } from "./types.js";
import { wheelModule } from "./define.js";
import { CommandExecutionError, PyTypeError, PyValueError, pyTruthy } from "./salt-errors.js";

const log = getLogger("brine.wheel");

/** Largest RSA key `key.gen`/`key.gen_accept` make, bits (cryptography's smallest is 1024). */
export const keysizeMax = 8192;
export const keysizeMin = 1024;

/** Salt's directory order in list_keys: accepted, pending, rejected, denied. */
const SALT_ORDER: KeyState[] = ["accepted", "pending", "rejected", "denied"];
const STATE_OF_DIR = new Map<string, KeyState>(SALT_ORDER.map((s) => [KEY_DIRS[s], s]));

type Listing = Record<string, string[]>;

function storeOf(ctx: WheelContext): KeyStore {
  return keyStoreFor(ctx.cfg);
}

/** Salt's `match`: a glob, globs joined by commas, or a list of globs. */
function globsOf(match: unknown): string[] {
  if (typeof match === "string") return match.includes(",") ? match.split(",") : [match];
  if (Array.isArray(match) && match.every((m) => typeof m === "string")) return match as string[];
  throw new PyTypeError(`match must be a string or a list of strings, not ${pyTypeName(match)}`);
}

function pyTypeName(v: unknown): string {
  if (v === null || v === undefined) return "NoneType";
  if (Array.isArray(v)) return "list";
  if (typeof v === "object") return "dict";
  if (typeof v === "number") return Number.isInteger(v) ? "int" : "float";
  return typeof v === "boolean" ? "bool" : "str";
}

/** Salt's list_keys: every state's ids, case-insensitively sorted. */
function listKeys(store: KeyStore): Listing {
  const ret: Listing = {};
  for (const s of SALT_ORDER) ret[KEY_DIRS[s]] = sortedIgnoreCase(store.list(s));
  return ret;
}

/** file name → path of the master's own key files (salt-key -F's "Local Keys"). */
function localKeys(ctx: WheelContext): Map<string, string> {
  const files = localKeyFiles(ctx.cfg);
  return new Map(sortedIgnoreCase(files.map((f) => path.basename(f))).map((n) => [n, files.find((f) => path.basename(f) === n)!]));
}

/** Salt's all_keys: list_keys plus `local`. */
function allKeys(ctx: WheelContext, store: KeyStore): Listing {
  return { ...listKeys(store), local: [...localKeys(ctx).keys()] };
}

/** Salt's name_match: the keys matching `match`, by directory (only directories with a match); `full` adds local keys. */
function nameMatch(ctx: WheelContext, store: KeyStore, match: unknown, full = false): Listing {
  const globs = globsOf(match);
  const ret: Listing = {};
  for (const t of matchKeys(store, SALT_ORDER, globs)) (ret[KEY_DIRS[t.state]] ??= []).push(t.id);
  for (const dir of Object.keys(ret)) ret[dir] = sortedIgnoreCase(ret[dir]);
  if (full) {
    const res = globs.map((g) => fnmatchToRegExp(g));
    const local = [...localKeys(ctx).keys()].filter((n) => res.some((re) => re.test(n)));
    if (local.length) ret.local = local;
  }
  return ret;
}

/** A caller's `{dir: [id…]}`: checked for shape; unknown directories and invalid ids are dropped. */
function matchDict(match: unknown): Listing {
  // no prototype: a request naming "__proto__" or "constructor" is just an unknown directory
  const ret: Listing = Object.create(null) as Listing;
  if (typeof match !== "object" || match === null || Array.isArray(match)) return ret;
  for (const [dir, ids] of Object.entries(match as Record<string, unknown>)) {
    if (!Array.isArray(ids) || !ids.every((i) => typeof i === "string")) throw new PyTypeError(`${dir}: a list of minion ids is expected`);
    ret[dir] = ids as string[];
  }
  return ret;
}

/** Salt's dict_match: where each requested id (taken as a glob) is now. */
function dictMatch(store: KeyStore, matches: Listing): Listing {
  const cur = listKeys(store);
  const ret: Listing = {};
  for (const ids of Object.values(matches)) {
    for (const id of sortedIgnoreCase(ids)) {
      for (const s of SALT_ORDER) {
        const dir = KEY_DIRS[s];
        if (fnmatchFilter(cur[dir], id).length) (ret[dir] ??= []).push(id);
      }
    }
  }
  return ret;
}

/**
 * Moves or removes the keys of `matches` found in the directories of `from`; fires and notes each change.
 * Accepting skips (and drops from `matches`) a key that is not an RSA public key, as Salt does; a key the
 * filesystem refuses to move or remove is logged and skipped (Salt skips it silently).
 */
function change(ctx: WheelContext, store: KeyStore, act: KeyAct, matches: Listing, from: readonly KeyState[]): number {
  let changed = 0;
  for (const state of from) {
    const dir = KEY_DIRS[state];
    for (const id of [...(matches[dir] ?? [])]) {
      if (!validId(id)) continue;
      if (act === "accept" && !isRsaPublicKeyPem(store.read(state, id))) {
        log.error(`Invalid RSA public key: ${id}`);
        matches[dir] = matches[dir].filter((m) => m !== id);
        continue;
      }
      try {
        if (!applyKeyAct(store, ctx.cfg, act, { state, id })) continue;
      } catch (e) {
        // Salt passes over a key it cannot move or remove and goes on; the answer shows where it still is
        log.warning(`wheel key.${act}: ${id} in ${dir}: ${(e as Error).message}`);
        continue;
      }
      changed++;
      ctx.note(`${act}:${id}`);
      ctx.fire(KEY_EVENT_TAG, keyEventData(act, id));
    }
  }
  if (changed > 0 && act !== "accept" && ctx.cfg.rotate_aes_key) writeDropFile(ctx.cfg);
  return changed;
}

function acceptFrom(kw: Record<string, unknown>): KeyState[] {
  return ["pending", ...(pyTruthy(kw.include_rejected) ? (["rejected"] as const) : []), ...(pyTruthy(kw.include_denied) ? (["denied"] as const) : [])];
}

function rejectFrom(kw: Record<string, unknown>): KeyState[] {
  return ["pending", ...(pyTruthy(kw.include_accepted) ? (["accepted"] as const) : []), ...(pyTruthy(kw.include_denied) ? (["denied"] as const) : [])];
}

type FromStates = (kw: Record<string, unknown>, matches: Listing) => KeyState[];

/** key.accept / reject / delete: act on the keys `match` names, answer where keys matching it are now. */
function byGlob(act: KeyAct, params: readonly string[], from: FromStates) {
  return {
    params,
    required: 1,
    run(ctx: WheelContext, kw: Record<string, unknown>) {
      const store = storeOf(ctx);
      const matches = nameMatch(ctx, store, kw.match);
      change(ctx, store, act, matches, from(kw, matches));
      return nameMatch(ctx, store, kw.match);
    },
  };
}

/** key.accept_dict / reject_dict / delete_dict: act on the keys `match` ({dir: [id…]}) lists, answer where they are now. */
function byDict(act: KeyAct, params: readonly string[], from: FromStates) {
  return {
    params,
    required: 1,
    run(ctx: WheelContext, kw: Record<string, unknown>) {
      const store = storeOf(ctx);
      const matches = matchDict(kw.match);
      change(ctx, store, act, matches, from(kw, matches));
      return dictMatch(store, matches);
    },
  };
}

function hashTypeOf(ctx: WheelContext, v: unknown): string {
  const h = v === null || v === undefined ? ctx.cfg.hash_type : v;
  if (typeof h !== "string" || !getHashes().includes(h.toLowerCase())) throw new PyValueError(`unsupported hash type ${JSON.stringify(h)}`);
  return h.toLowerCase();
}

function keysizeOf(v: unknown): number {
  const n = typeof v === "string" && /^\d+$/.test(v.trim()) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n)) throw new PyTypeError(`keysize must be an integer, not ${pyTypeName(v)}`);
  if (n < keysizeMin) throw new PyValueError(`key_size must be at least ${keysizeMin}-bits.`);
  if (n > keysizeMax) throw new PyValueError(`key_size must be at most ${keysizeMax}-bits (brine's keysizeMax).`);
  return n;
}

/** Salt's clean.trim: a missing or blank value is refused. */
function trimmed(v: unknown): string {
  const s = v === null || v === undefined || v === false ? "" : String(v).trim();
  if (!s) throw new CommandExecutionError("Empty value during sanitation");
  return s;
}

async function gen(kw: Record<string, unknown>): Promise<{ priv: string; pub: string }> {
  // Salt cleans id_ only to name its temporary files; brine writes none, but refuses a blank id as Salt does
  if (kw.id_ !== null && kw.id_ !== undefined) trimmed(kw.id_);
  const { privatePem, publicPem } = await generateRsaPemAsync(keysizeOf(kw.keysize ?? 2048));
  return { priv: privatePem, pub: publicPem };
}

function masterPub(ctx: WheelContext): string {
  return path.join(ctx.cfg.pki_dir, "master.pub");
}

export const KEY_FUNCTIONS = wheelModule("key", {
  list: {
    params: ["match"],
    required: 1,
    pyName: "list_",
    run(ctx, kw) {
      const m = kw.match;
      if (typeof m !== "string") throw new PyTypeError(`match must be a string, not ${pyTypeName(m)}`);
      const store = storeOf(ctx);
      const one = (s: KeyState): Listing => ({ [KEY_DIRS[s]]: sortedIgnoreCase(store.list(s)) });
      if (m.startsWith("acc")) return one("accepted");
      if (m.startsWith("pre") || m.startsWith("un")) return one("pending");
      if (m.startsWith("rej")) return one("rejected");
      if (m.startsWith("den")) return one("denied");
      if (m.startsWith("all")) return allKeys(ctx, store);
      return {};
    },
  },
  list_all: {
    params: [],
    run: (ctx) => allKeys(ctx, storeOf(ctx)),
  },
  name_match: {
    params: ["match"],
    required: 1,
    run: (ctx, kw) => nameMatch(ctx, storeOf(ctx), kw.match),
  },
  accept: byGlob("accept", ["match", "include_rejected", "include_denied"], acceptFrom),
  accept_dict: byDict("accept", ["match", "include_rejected", "include_denied"], acceptFrom),
  reject: byGlob("reject", ["match", "include_accepted", "include_denied"], rejectFrom),
  reject_dict: byDict("reject", ["match", "include_accepted", "include_denied"], rejectFrom),
  delete: byGlob("delete", ["match"], () => SALT_ORDER),
  delete_dict: byDict("delete", ["match"], (_kw, matches) => SALT_ORDER.filter((s) => KEY_DIRS[s] in matches)),
  print: {
    params: ["match"],
    required: 1,
    pyName: "key_str",
    run(ctx, kw) {
      const store = storeOf(ctx);
      const ret: Record<string, Record<string, string>> = {};
      for (const [dir, ids] of Object.entries(nameMatch(ctx, store, kw.match))) {
        ret[dir] = Object.fromEntries(ids.map((id) => [id, store.read(STATE_OF_DIR.get(dir)!, id) ?? ""]));
      }
      return ret;
    },
  },
  finger: {
    params: ["match", "hash_type"],
    required: 1,
    run(ctx, kw) {
      const hashType = hashTypeOf(ctx, kw.hash_type);
      const store = storeOf(ctx);
      const local = localKeys(ctx);
      const ret: Record<string, Record<string, string>> = {};
      for (const [dir, ids] of Object.entries(nameMatch(ctx, store, kw.match, true))) {
        ret[dir] = Object.fromEntries(
          ids.map((id) => [id, dir === "local" ? fileFinger(local.get(id)!, hashType) : minionKeyFinger(store, STATE_OF_DIR.get(dir)!, id, hashType)]),
        );
      }
      return ret;
    },
  },
  master_key_str: {
    params: [],
    run: (ctx) => ({ local: { "master.pub": readFileSync(masterPub(ctx), "utf8") } }),
  },
  finger_master: {
    params: ["hash_type"],
    run: (ctx, kw) => ({ local: { "master.pub": pemFinger(readFileSync(masterPub(ctx), "utf8"), hashTypeOf(ctx, kw.hash_type)) } }),
  },
  gen: {
    params: ["id_", "keysize"],
    run: (_ctx, kw) => gen(kw),
  },
  gen_accept: {
    params: ["id_", "keysize", "force"],
    required: 1,
    async run(ctx, kw) {
      // Salt's clean.id: letters, digits, '.' and '-' only, no leading or trailing dots
      const id = trimmed(kw.id_).replace(/[^a-zA-Z0-9.-]/g, "").replace(/^\.+|\.+$/g, "");
      if (!validId(id)) throw new CommandExecutionError("Empty value during sanitation");
      const store = storeOf(ctx);
      if (store.exists("accepted", id) && !pyTruthy(kw.force)) return {};
      const ret = await gen({ id_: id, keysize: kw.keysize });
      store.write("accepted", id, ret.pub);
      ctx.note(`accept:${id}`);
      ctx.fire(KEY_EVENT_TAG, keyEventData("accept", id));
      return ret;
    },
  },
});
