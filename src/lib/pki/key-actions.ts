/**
 * What a key-state change does, shared by `salt-key` (src/cli/salt-key.ts) and the wheel `key.*` functions
 * (src/lib/wheel/key.ts), so the two cannot drift: which keys a glob picks, the move or removal itself (a deleted
 * key's session file goes with it), the `salt/key` event's shape, the AES rotation drop file, and the local
 * key files whose fingerprints `salt-key -F` and `key.finger` show.
 *
 * Firing the event is the caller's: salt-key asks a running master over the control socket, a wheel call
 * goes through its WheelContext (the request worker's effects).
 */
import { chmodSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createPublicKey } from "node:crypto";
import path from "node:path";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { fnmatchToRegExp } from "../targeting/index.js";
import { pemFinger } from "../../shared/protocol/pem.js";
import { rsaPublicJwk } from "../../shared/protocol/rsa.js";
import { minionFacingKeyFiles } from "../../shared/shared-fs.js";
import type { KeyState, KeyStore } from "./key-store.js";

export type KeyAct = "accept" | "reject" | "delete";
export interface KeyTarget {
  state: KeyState;
  id: string;
}

/** The tag of a key-state change event (Salt's tagify(prefix="key")). */
export const KEY_EVENT_TAG = "salt/key";

/** The data of the `salt/key` event for one changed key, as Salt's Key class fires it. */
export function keyEventData(act: KeyAct, id: string): { result: true; act: KeyAct; id: string } {
  return { result: true, act, id };
}

/** Python's sorted(names, key=str.lower) (Salt's sorted_ignorecase): stable, so equal-folding names keep their order. */
export function sortedIgnoreCase(names: readonly string[]): string[] {
  return names
    .map((n, i) => ({ n, k: n.toLowerCase(), i }))
    .sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : a.i - b.i))
    .map((e) => e.n);
}

/** The keys in `states` (in that order, each state's ids as the store lists them) whose id matches any of `globs`. */
export function matchKeys(store: KeyStore, states: readonly KeyState[], globs: readonly string[]): KeyTarget[] {
  const res = globs.map((g) => fnmatchToRegExp(g));
  return states.flatMap((state) =>
    store
      .list(state)
      .filter((id) => res.some((re) => re.test(id)))
      .map((id) => ({ state, id })),
  );
}

/**
 * Carries out one change: accept/reject move the key to accepted/rejected (false when it is already there
 * or the file went away meanwhile), delete removes it and the minion's session key file.
 */
export function applyKeyAct(store: KeyStore, cfg: Pick<MasterConfig, "cachedir">, act: KeyAct, t: KeyTarget): boolean {
  if (act === "delete") {
    const removed = store.remove(t.state, t.id);
    rmSync(path.join(cfg.cachedir, "sessions", t.id), { force: true });
    return removed;
  }
  const to: KeyState = act === "accept" ? "accepted" : "rejected";
  if (t.state === to) return false;
  try {
    store.move(t.state, to, t.id);
  } catch (e) {
    // another process moved or deleted it between the listing and now (Salt passes on OSError too)
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw e;
  }
  return true;
}

/**
 * Salt's crypt.dropfile (3007): ask the master (its maintenance loop, which reads and removes the file) to rotate
 * the publish AES key. A drop file already waiting is the request made: it is left as it is. The file is written
 * beside (`.dfn-next`, read-only) and renamed into place, so the master never reads it half written and no step
 * here touches `.dfn` once the master may have taken it (writing `.dfn` and then setting its mode failed with
 * ENOENT when the master was that quick). Another salt-key renaming the same `.dfn-next` first made the request.
 */
export function writeDropFile(cfg: Pick<MasterConfig, "cachedir" | "id">): void {
  const dfn = path.join(cfg.cachedir, ".dfn");
  if (existsSync(dfn)) return;
  const next = `${dfn}-next`;
  // one left by a salt-key that died before its rename: read-only, so not writable again in place
  rmSync(next, { force: true });
  writeFileSync(next, cfg.id, { mode: 0o400 });
  chmodSync(next, 0o400);
  try {
    renameSync(next, dfn);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
}

/**
 * The master's own key files that exist, as `salt-key -F` lists them under "Local Keys": the pair minions
 * see (cluster.pem/pub under clustering), then this master's master.pem/pub when different.
 */
export function localKeyFiles(cfg: Pick<MasterConfig, "pki_dir" | "cluster_pki_dir" | "cluster_id">): string[] {
  const mf = minionFacingKeyFiles(cfg);
  const files = [mf.pem, mf.pub, path.join(cfg.pki_dir, "master.pem"), path.join(cfg.pki_dir, "master.pub")];
  return files.filter((f, i) => files.indexOf(f) === i && existsSync(f));
}

/** Salt's pem_finger of a key file (`hashType` as hashlib names it, e.g. sha256, md5). */
export function fileFinger(file: string, hashType: string): string {
  return pemFinger(readFileSync(file, "utf8"), hashType);
}

/** The fingerprint of a minion's key as salt-key -f and key.finger show it (an unreadable file: the empty text's). */
export function minionKeyFinger(store: KeyStore, state: KeyState, id: string, hashType: string): string {
  return pemFinger(store.read(state, id) ?? "", hashType);
}

/**
 * Whether `pem` is an RSA public key Salt's get_rsa_pub_key would load (PKCS#1 or SPKI "PUBLIC KEY" PEM): canonical
 * DER is read by rsaPublicJwk's walk (~8 µs; a state-sync pull checks every key it installs, 100k at a join), anything
 * else by OpenSSL (~150 µs), which accepts or refuses it as before.
 */
export function isRsaPublicKeyPem(pem: string | undefined): boolean {
  if (pem === undefined || !/-----BEGIN (RSA )?PUBLIC KEY-----/.test(pem)) return false;
  if (rsaPublicJwk(pem)) return true;
  try {
    return createPublicKey(pem).asymmetricKeyType === "rsa";
  } catch {
    return false;
  }
}
