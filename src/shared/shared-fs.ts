/**
 * Shared-filesystem mode (the default cluster topology, Salt's master-cluster tutorial): what every master of
 * a cluster reads from `cluster_pki_dir`, and where each master keeps what must not be shared.
 *
 * | file in `cluster_pki_dir`       | what it is                                                            |
 * |---------------------------------|-----------------------------------------------------------------------|
 * | `cluster.pem` / `cluster.pub`   | the key pair minions see (auth replies, publish signatures), for all masters |
 * | `.aes`                          | the cluster-wide publish AES key (a minion moving to another master needs no re-auth) |
 * | `minions/`, `minions_pre/`, ... | minion keys (accepted, pending, rejected, denied): `salt-key` on any master is seen by all |
 * | `peers/<id>.pub`                | each master's own `master.pub`, its identity on the peer channel      |
 *
 * Every file another master may be creating at the same moment is created with a no-clobber link (write a
 * private temporary file, `link` it to the final name, which fails if the name exists): the first master wins
 * and the others read the winner's file, so two masters starting together never end up with different cluster
 * keys. Replacements (AES rotation) are temp file + rename, so a reader never sees half a key.
 *
 * Local state: LMDB environments (job cache, Raft log) never sit on a network filesystem (LMDB's locks and
 * mmap do not work there), and two masters must never open the same one. Under `cluster_id`, unless
 * `brine_lmdb_dir` / `brine_raft_lmdb_dir` say otherwise, each master's environments go to a directory named
 * after its node id: under `cachedir` when `cachedir` is on a local filesystem, else under
 * `brine_local_dir` (default `/var/lib/brine`, below `root_dir`).
 */
import { generateKeyPairSync, createPrivateKey, createPublicKey } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { BrineError } from "./errors.js";
import { getLogger } from "./log.js";
import { generateKeyString } from "./protocol/crypticle.js";
import { cleanKey } from "./protocol/pem.js";

const log = getLogger("brine.cluster");

/** The subset of the master config read here. */
export interface SharedFsConfig {
  id: string;
  pki_dir: string;
  cachedir: string;
  root_dir?: string;
  keysize: number;
  cluster_id: string | null;
  cluster_pki_dir: string | null;
  brine_lmdb_dir?: unknown;
  brine_raft_lmdb_dir?: unknown;
  brine_local_dir?: unknown;
}

/** Name of the minion-facing key pair under clustering (Salt's MasterKeys with cluster_id). */
export const CLUSTER_KEY_NAME = "cluster";
/** The shared publish AES key file in `cluster_pki_dir`. */
export const CLUSTER_AES_FILE = ".aes";

export function isClustered(cfg: Pick<SharedFsConfig, "cluster_id">): boolean {
  return typeof cfg.cluster_id === "string" && cfg.cluster_id !== "";
}

/** `cluster_pki_dir`, falling back to `pki_dir` as 3007 does. */
export function clusterPkiDir(cfg: Pick<SharedFsConfig, "pki_dir" | "cluster_pki_dir">): string {
  return typeof cfg.cluster_pki_dir === "string" && cfg.cluster_pki_dir !== "" ? cfg.cluster_pki_dir : cfg.pki_dir;
}

/** Where minion keys live: `cluster_pki_dir` under clustering (shared by all masters), else `pki_dir`. */
export function minionPkiDir(cfg: Pick<SharedFsConfig, "pki_dir" | "cluster_pki_dir" | "cluster_id">): string {
  return isClustered(cfg) ? clusterPkiDir(cfg) : cfg.pki_dir;
}

/** The key pair minions see: `cluster_pki_dir/cluster.{pem,pub}` under clustering, else `pki_dir/master.{pem,pub}`. */
export function minionFacingKeyFiles(cfg: Pick<SharedFsConfig, "pki_dir" | "cluster_pki_dir" | "cluster_id">): { pem: string; pub: string } {
  const [dir, name] = isClustered(cfg) ? [clusterPkiDir(cfg), CLUSTER_KEY_NAME] : [cfg.pki_dir, "master"];
  return { pem: path.join(dir, `${name}.pem`), pub: path.join(dir, `${name}.pub`) };
}

function tmpName(file: string): string {
  return `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
}

/** Creates `file` with `data` unless it exists (another master may race us); true when this call created it. */
export function createExclusive(file: string, data: string, mode: number): boolean {
  const tmp = tmpName(file);
  writeFileSync(tmp, data, { mode });
  try {
    linkSync(tmp, file);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw e;
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** Replaces `file` atomically (temp file + rename). */
export function replaceAtomically(file: string, data: string, mode: number): void {
  const tmp = tmpName(file);
  writeFileSync(tmp, data, { mode });
  renameSync(tmp, file);
}

function readOrExplain(file: string, what: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "does not exist" : code === "EACCES" ? "is not readable by this user" : (e as Error).message;
    throw new BrineError("CLUSTER_KEY", `${what} ${file} ${why}`);
  }
}

/**
 * Makes sure `cluster_pki_dir` holds the cluster key pair (the first master to start generates it) and that
 * both halves are readable and match. Throws CLUSTER_KEY naming the file and the fix.
 */
export function ensureClusterKeys(cfg: SharedFsConfig): { pem: string; pub: string; created: boolean } {
  const dir = clusterPkiDir(cfg);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw new BrineError("CLUSTER_KEY", `cluster_pki_dir ${dir} cannot be created (${(e as Error).message})`);
  }
  const files = minionFacingKeyFiles(cfg);
  let created = false;
  try {
    readFileSync(files.pem);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") readOrExplain(files.pem, "the cluster private key");
    const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: cfg.keysize, publicExponent: 65537 });
    // the public half first: a master that sees cluster.pem may read cluster.pub at once
    const pub = publicKey.export({ type: "spki", format: "pem" }) as string;
    const pem = privateKey.export({ type: "pkcs1", format: "pem" }) as string;
    const pubTmp = tmpName(files.pub);
    writeFileSync(pubTmp, pub, { mode: 0o644 });
    created = createExclusive(files.pem, pem, 0o400);
    if (created) renameSync(pubTmp, files.pub);
    else rmSync(pubTmp, { force: true });
    if (created) log.info(`generated the cluster key pair in ${dir}`);
  }
  const pemText = readOrExplain(files.pem, "the cluster private key");
  let derived: string;
  try {
    derived = createPublicKey(createPrivateKey(pemText)).export({ type: "spki", format: "pem" }) as string;
  } catch (e) {
    throw new BrineError("CLUSTER_KEY", `the cluster private key ${files.pem} could not be parsed (${(e as Error).message})`);
  }
  let pubText: string;
  try {
    pubText = readFileSync(files.pub, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw new BrineError("CLUSTER_KEY", `the cluster public key ${files.pub} is not readable (${(e as Error).message})`);
    // cluster.pub is re-derived from cluster.pem, never the reverse (as for master.pub)
    createExclusive(files.pub, derived, 0o644);
    pubText = readFileSync(files.pub, "utf8");
  }
  if (cleanKey(pubText) !== cleanKey(derived)) {
    throw new BrineError("CLUSTER_KEY", `${files.pub} does not match ${files.pem}: restore the pair every master and minion knows`);
  }
  return { pem: pemText, pub: pubText, created };
}

/** The cluster-wide AES key: `cluster_pki_dir/.aes`, created by the first master that finds none. */
export function readOrCreateClusterAes(cfg: SharedFsConfig): string {
  const file = path.join(clusterPkiDir(cfg), CLUSTER_AES_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const key = readFileSync(file, "latin1").trim();
      if (key) return key;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw new BrineError("CLUSTER_KEY", `the cluster AES key ${file} is not readable (${(e as Error).message})`);
    }
    if (createExclusive(file, generateKeyString(), 0o600)) log.info(`generated the cluster AES key ${file}`);
  }
  throw new BrineError("CLUSTER_KEY", `the cluster AES key ${file} is empty; delete it and restart`);
}

/** Writes a rotated cluster AES key (every master reads the same file on its next start). */
export function writeClusterAes(cfg: SharedFsConfig, key: string): void {
  replaceAtomically(path.join(clusterPkiDir(cfg), CLUSTER_AES_FILE), key, 0o600);
}

// ------------------------------------------------------------------ local state

/** statfs magic numbers of network and cluster filesystems (linux/magic.h and the FUSE/Gluster/Ceph ones). */
const NETWORK_FS_TYPES = new Set<number>([
  0x6969, // NFS
  0xff534d42, // CIFS
  0xfe534d42, // SMB2
  0x517b, // SMB
  0x65735546, // FUSE (GlusterFS, sshfs, ...)
  0x00c36400, // Ceph
  0x01021997, // 9p
  0x47504653, // GPFS
  0x0bd00bd0, // Lustre
  0x73757245, // Coda
  0x5346414f, // AFS
]);

/** True when `dir` (or its nearest existing ancestor) is on a network filesystem. */
export function onNetworkFs(dir: string): boolean {
  let d = path.resolve(dir);
  for (;;) {
    try {
      return NETWORK_FS_TYPES.has(Number(statfsSync(d).type) >>> 0);
    } catch {
      const up = path.dirname(d);
      if (up === d) return false;
      d = up;
    }
  }
}

/**
 * Under clustering, points `brine_lmdb_dir` and `brine_raft_lmdb_dir` (when not set explicitly) at a local
 * directory of this master's own, and returns what it chose. Call once, before anything opens LMDB; request
 * workers and runner threads get the mutated config.
 */
export function resolveLocalState(cfg: SharedFsConfig, networkFs: (dir: string) => boolean = onNetworkFs): { base: string; lmdb: string; raft: string } | undefined {
  if (!isClustered(cfg)) return undefined;
  const explicit = (v: unknown) => typeof v === "string" && v !== "";
  let base = path.join(cfg.cachedir, "brine-node", cfg.id);
  if (networkFs(cfg.cachedir)) {
    const local = explicit(cfg.brine_local_dir) ? String(cfg.brine_local_dir) : path.join(cfg.root_dir && cfg.root_dir !== "/" ? cfg.root_dir : "/", "var", "lib", "brine");
    base = path.join(local, cfg.id);
    if (networkFs(local)) {
      throw new BrineError("CLUSTER_CONFIG", `cachedir ${cfg.cachedir} and ${local} are network filesystems; set brine_local_dir (or brine_lmdb_dir and brine_raft_lmdb_dir) to a local disk`);
    }
    log.info(`cachedir ${cfg.cachedir} is a network filesystem: LMDB environments go to ${base}`);
  }
  if (!explicit(cfg.brine_lmdb_dir)) cfg.brine_lmdb_dir = path.join(base, "brine-lmdb");
  if (!explicit(cfg.brine_raft_lmdb_dir)) cfg.brine_raft_lmdb_dir = path.join(base, "brine-raft-lmdb");
  for (const [opt, dir] of [["brine_lmdb_dir", cfg.brine_lmdb_dir], ["brine_raft_lmdb_dir", cfg.brine_raft_lmdb_dir]] as const) {
    if (networkFs(String(dir))) throw new BrineError("CLUSTER_CONFIG", `${opt} ${String(dir)} is on a network filesystem; LMDB needs a local disk`);
  }
  return { base, lmdb: String(cfg.brine_lmdb_dir), raft: String(cfg.brine_raft_lmdb_dir) };
}
