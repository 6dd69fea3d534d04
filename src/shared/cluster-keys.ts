/**
 * Peer identities. A master proves who it is on the peer channel with the RSA key pair it already has:
 * its private key is `pki_dir/master.pem`, and every master's public key is the file Salt keeps for it,
 * `cluster_pki_dir/peers/<id>.pub`. No second key pair is made for the channel, because:
 *
 * - one identity, one file: Salt's join flow writes `peers/<id>.pub`, and removing a master is "delete its
 *   `peers/<id>.pub`" (salt-cluster.md §5). A separate sodium key beside it could disagree with the RSA key,
 *   or survive a removal, and would need its own distribution and rotation story;
 * - the RSA cost is paid once per connection, not per message: one sign (≈0.3 ms at 2048 bits) and one
 *   verify (≈25 µs) per handshake side. Per-message work is XChaCha20-Poly1305 only (reference-points.md A3/A4).
 *
 * Ed25519 public keys are accepted too (same files, PEM SPKI), so a deployment can move to them without a
 * protocol change. RSA keys shorter than 2048 bits are refused.
 *
 * Invariant: a key is looked up only by a node id that passed `validateNodeId` and `isKeyFileId` (no path
 * separators, no leading dot), so a peer-supplied id can never name a file outside `peers/`.
 */
import { createPrivateKey, createPublicKey, sign as rsaSign, verify as rsaVerify, constants, type KeyObject } from "node:crypto";
import { existsSync, readFileSync, readdirSync, renameSync, writeFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import { BrineError } from "./errors.js";
import { validateNodeId } from "./cluster-names.js";

/** Smallest RSA modulus accepted for a peer identity, bits. */
export const rsaBitsMin = 2048;
/** Lookups of ids with no key file remembered at once (forged ids must not grow memory), count. */
const missesRememberedMax = 1024;

/** This master's identity on the channel. */
export interface PeerIdentity {
  id: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

/** Where the channel finds a peer's public key. `get` must be cheap: it runs on the event loop per handshake. */
export interface PeerKeyring {
  get(id: string): KeyObject | undefined;
}

/** A node id that may name a key file: a valid node id without path separators or a leading dot. */
export function isKeyFileId(id: string): boolean {
  try {
    validateNodeId(id);
  } catch {
    return false;
  }
  return !/[/\\]/.test(id) && !id.startsWith(".");
}

/** Parses a public key PEM (SPKI or PKCS#1), refusing key types and sizes the channel does not accept. */
export function parsePeerPublicKey(pem: string | Buffer, what: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch (e) {
    throw new BrineError("CLUSTER_KEY", `${what} is not a public key PEM (${(e as Error).message})`);
  }
  checkKeyType(key, what);
  return key;
}

function checkKeyType(key: KeyObject, what: string): void {
  const type = key.asymmetricKeyType;
  if (type === "ed25519") return;
  if (type !== "rsa") throw new BrineError("CLUSTER_KEY", `${what} is a ${String(type)} key; RSA or Ed25519 expected`);
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < rsaBitsMin) throw new BrineError("CLUSTER_KEY", `${what} is RSA-${bits}; at least ${rsaBitsMin} bits are required`);
}

/** Sign `data` with this master's key: RSA-PSS/SHA-256 (salt = digest length) or pure Ed25519. */
export function signWith(key: KeyObject, data: Uint8Array): Uint8Array {
  if (key.asymmetricKeyType === "ed25519") return rsaSign(null, data, key);
  return rsaSign("sha256", data, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST });
}

/** Verify a signature made by signWith; false (never a throw) for anything that does not verify. */
export function verifyWith(key: KeyObject, data: Uint8Array, sig: Uint8Array): boolean {
  try {
    if (key.asymmetricKeyType === "ed25519") return rsaVerify(null, data, key, sig);
    return rsaVerify("sha256", data, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST }, sig);
  } catch {
    return false;
  }
}

function samePublicKey(a: KeyObject, b: KeyObject): boolean {
  return a.export({ type: "spki", format: "der" }).equals(b.export({ type: "spki", format: "der" }));
}

function readKeyFile(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "does not exist" : code === "EACCES" ? "is not readable by this user" : (e as Error).message;
    throw new BrineError("CLUSTER_KEY", `${what} ${file} ${why}`);
  }
}

/** The private key PEM of this master (`pki_dir/master.pem`), as its peer identity. */
export function loadSelfIdentity(pkiDir: string, id: string): PeerIdentity {
  const file = path.join(pkiDir, "master.pem");
  const pem = readKeyFile(file, "this master's private key");
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(pem);
  } catch (e) {
    throw new BrineError("CLUSTER_KEY", `this master's private key ${file} could not be parsed (${(e as Error).message}); passphrase-protected keys are not supported`);
  }
  const publicKey = createPublicKey(privateKey);
  checkKeyType(publicKey, `this master's key ${file}`);
  return { id, privateKey, publicKey };
}

/** An in-memory keyring (tests, or a caller that manages the files itself). */
export class StaticKeyring implements PeerKeyring {
  private readonly keys = new Map<string, KeyObject>();

  constructor(entries: Iterable<[string, KeyObject]> = []) {
    for (const [id, k] of entries) this.set(id, k);
  }

  get(id: string): KeyObject | undefined {
    return this.keys.get(id);
  }

  set(id: string, key: KeyObject): void {
    validateNodeId(id, "peer id");
    this.keys.set(id, key);
  }

  delete(id: string): void {
    this.keys.delete(id);
  }

  ids(): string[] {
    return [...this.keys.keys()].sort();
  }
}

export interface FileKeyringOptions {
  /** how long a lookup of an id without a key file is remembered before the disk is asked again, ms */
  missRecheckMs?: number;
}

/**
 * The keys in `cluster_pki_dir/peers/`, loaded at start-up (a bad file is a start-up error), with lazy
 * pick-up of a file that appears later (a master that joined through a shared `cluster_pki_dir`). A lookup
 * that misses is not retried against the disk for `missRecheckMs`, so a stream of HELLOs naming unknown ids
 * costs one `stat` per id per interval, and at most missesRememberedMax misses are remembered.
 */
export class FileKeyring implements PeerKeyring {
  private readonly keys = new Map<string, KeyObject>();
  private readonly misses = new Map<string, number>();
  private readonly missRecheckMs: number;

  constructor(
    readonly dir: string,
    private readonly selfId: string,
    opts: FileKeyringOptions = {},
  ) {
    this.missRecheckMs = opts.missRecheckMs ?? 5000;
  }

  /** Reads every `<id>.pub` in the directory; throws CLUSTER_KEY naming the first bad file. */
  load(): this {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return this;
      throw new BrineError("CLUSTER_KEY", `peer key directory ${this.dir} is not readable (${(e as Error).message})`);
    }
    for (const name of names.sort()) {
      if (!name.endsWith(".pub")) continue;
      const id = name.slice(0, -".pub".length);
      if (!isKeyFileId(id)) throw new BrineError("CLUSTER_KEY", `peer key file ${path.join(this.dir, name)} is not named <node id>.pub`);
      this.keys.set(id, this.readKey(id));
    }
    return this;
  }

  private readKey(id: string): KeyObject {
    const file = path.join(this.dir, `${id}.pub`);
    return parsePeerPublicKey(readKeyFile(file, `peer key of ${id}`), `peer key ${file}`);
  }

  get(id: string): KeyObject | undefined {
    const known = this.keys.get(id);
    if (known || !isKeyFileId(id)) return known;
    const now = Date.now();
    const missed = this.misses.get(id);
    if (missed !== undefined && now - missed < this.missRecheckMs) return undefined;
    const file = path.join(this.dir, `${id}.pub`);
    if (existsSync(file)) {
      try {
        const key = this.readKey(id);
        this.keys.set(id, key);
        this.misses.delete(id);
        return key;
      } catch {
        // a half-written or bad file: treated as absent until the next recheck
      }
    }
    if (this.misses.size >= missesRememberedMax) this.misses.clear();
    this.misses.set(id, now);
    return undefined;
  }

  /** Adds or replaces a peer's key in memory (the join flow calls this after writing the file). */
  set(id: string, pem: string | Buffer): void {
    if (!isKeyFileId(id)) throw new BrineError("CLUSTER_BAD_NODE_ID", `peer id ${JSON.stringify(id)} cannot name a key file`);
    this.keys.set(id, parsePeerPublicKey(pem, `peer key of ${id}`));
    this.misses.delete(id);
  }

  delete(id: string): void {
    this.keys.delete(id);
  }

  /** Ids with a loaded key, this master's own excluded, sorted. */
  peerIds(): string[] {
    return [...this.keys.keys()].filter((id) => id !== this.selfId).sort();
  }

  /** The loaded key of `id`, without touching the disk. */
  loaded(id: string): KeyObject | undefined {
    return this.keys.get(id);
  }
}

/**
 * Checks this master's own entry in `peers/`: absent is fine (see publishSelfKey); present with another key
 * means a second master runs, or ran, under the same node id, which Salt would silently mix up.
 */
export function checkSelfEntry(keyring: FileKeyring, self: PeerIdentity): void {
  const listed = keyring.loaded(self.id);
  if (listed && !samePublicKey(listed, self.publicKey)) {
    throw new BrineError(
      "CLUSTER_BAD_NODE_ID",
      `duplicate node id ${JSON.stringify(self.id)}: ${path.join(keyring.dir, `${self.id}.pub`)} holds another master's key; give each master its own \`id\``,
    );
  }
}

/**
 * Writes this master's public key to `peers/<id>.pub` when it is missing (what Salt does at start-up),
 * atomically (temporary file + rename) so a peer reading the shared directory never sees half a key.
 * Returns true when it wrote the file.
 */
export function publishSelfKey(keyring: FileKeyring, self: PeerIdentity): boolean {
  const file = path.join(keyring.dir, `${self.id}.pub`);
  if (existsSync(file)) return false;
  mkdirSync(keyring.dir, { recursive: true, mode: 0o755 });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, self.publicKey.export({ type: "spki", format: "pem" }) as string, { mode: 0o644 });
  renameSync(tmp, file);
  keyring.set(self.id, readFileSync(file));
  return true;
}
