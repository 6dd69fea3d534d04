/**
 * Signing the master's public key for minions with `verify_master_pubkey_sign` (Salt's MasterKeys and
 * channel/server.py `_auth`, 3006.8 and 3007.x). With `master_sign_pubkey: True` every accepted `_auth`
 * reply carries `pub_sig`:
 * - `master_use_pubkey_signature: True`: the text of `pki_dir/<master_pubkey_signature>` (made once with
 *   `salt-key --gen-signature`), clean_key'd, as Salt reads it; the master refuses to start without it;
 * - otherwise: the base64 (one line and a final newline, Python's b2a_base64) of the PKCS#1 v1.5 signature
 *   with `pki_dir/<master_sign_key_name>.pem` over the exact `pub_key` text of the reply (clean_key of the
 *   minion-facing master.pub), hashed with the minion's `sig_algo` (SHA-1 when it sends none, as 3006.8
 *   always does). The pair is generated at start when missing, as Salt does.
 * The minion checks it with its own copy of `<master_sign_key_name>.pub`; a wrong pair is refused there
 * ("signature verification failed"). A signature is deterministic, so it is made once per algorithm.
 * Golden vectors captured from the Python master: test/fixtures/master-sign/.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import type { KeyObject } from "node:crypto";
import { BrineError } from "../../shared/errors.js";
import { cleanKey } from "../../shared/protocol/pem.js";
import { privateKey, publicKey, rsaSign, rsaVerify, type SigAlgo } from "../../shared/protocol/rsa.js";
import { loadOrCreateKeyPair } from "./master-keys.js";

export interface MasterSignOptions {
  pki_dir: string;
  keysize: number;
  master_sign_pubkey?: boolean;
  master_sign_key_name?: string;
  master_pubkey_signature?: string;
  master_use_pubkey_signature?: boolean;
}

function signaturePath(cfg: MasterSignOptions): string {
  return path.join(cfg.pki_dir, cfg.master_pubkey_signature ?? "master_pubkey_signature");
}

function signKeyName(cfg: MasterSignOptions): string {
  const name = cfg.master_sign_key_name ?? "master_sign";
  if (!name || name.includes("/") || name.includes("\0")) throw new BrineError("MASTER_SIGN", `master_sign_key_name ${JSON.stringify(name)} is not a file name`);
  return name;
}

/**
 * At start, on the main thread, before any request thread reads them: generates the signing pair when it is
 * missing, or checks the pre-made signature file exists. Returns a line for the log, or undefined when
 * signing is off. `warn` hears of a pre-made signature that `pki_dir/<master_sign_key_name>.pub`, when there
 * is one, does not verify over the `pub_key` the replies carry: every minion with verify_master_pubkey_sign
 * would refuse this master.
 */
export function prepareMasterSign(cfg: MasterSignOptions, warn: (line: string) => void = () => undefined): string | undefined {
  if (!cfg.master_sign_pubkey) return undefined;
  if (cfg.master_use_pubkey_signature) {
    const file = signaturePath(cfg);
    if (!existsSync(file)) {
      throw new BrineError("MASTER_SIGN", `master_use_pubkey_signature is set but ${file} does not exist; make it with 'salt-key --gen-signature' (or set master_pubkey_signature to its name)`);
    }
    const problem = preMadeSignatureProblem(cfg, file);
    if (problem) warn(problem);
    return `Read master.pub's signature from ${file}`;
  }
  const name = signKeyName(cfg);
  const pair = loadOrCreateKeyPair(cfg.pki_dir, name, cfg.keysize);
  return pair.created ? `Generated the signing key pair ${name}.pem/.pub in ${cfg.pki_dir}` : `Signing master.pub with ${path.join(cfg.pki_dir, `${name}.pem`)}`;
}

/** Why minions would refuse the pre-made signature in `file`, when the signing pair's public half is here to tell. */
function preMadeSignatureProblem(cfg: MasterSignOptions, file: string): string | undefined {
  const signPub = path.join(cfg.pki_dir, `${signKeyName(cfg)}.pub`);
  const masterPub = path.join(cfg.pki_dir, "master.pub");
  if (!existsSync(signPub) || !existsSync(masterPub)) return undefined;
  try {
    const key = publicKey(readFileSync(signPub, "utf8"));
    const sig = Buffer.from(cleanKey(readFileSync(file, "utf8")), "base64");
    const raw = readFileSync(masterPub, "utf8");
    if (rsaVerify(key, Buffer.from(cleanKey(raw), "utf8"), sig, "PKCS1v15-SHA1")) return undefined;
    if (rsaVerify(key, Buffer.from(raw, "utf8"), sig, "PKCS1v15-SHA1")) {
      return `${file} signs master.pub with its trailing newline (Salt 3007's salt-key --gen-signature, saltstack/salt#68930): minions with verify_master_pubkey_sign will refuse this master ("signature verification failed"); move it aside and make it again with brine's salt-key --gen-signature`;
    }
    return `${file} is not a signature of master.pub by ${signPub}: minions with verify_master_pubkey_sign and that ${path.basename(signPub)} will refuse this master`;
  } catch (e) {
    return `${file} could not be checked against ${signPub}: ${(e as Error).message}`;
  }
}

/** Makes the `pub_sig` of accepted sign-in replies; one per request thread. */
export class MasterPubSigner {
  private readonly fixed: string | undefined;
  private readonly key: KeyObject | undefined;
  private readonly sigs = new Map<SigAlgo, string>();

  private constructor(fixed: string | undefined, key: KeyObject | undefined, private readonly pubClean: string) {
    this.fixed = fixed;
    this.key = key;
  }

  /** undefined when `master_sign_pubkey` is off. `pubClean`: the `pub_key` text the replies carry. */
  static load(cfg: MasterSignOptions, pubClean: string): MasterPubSigner | undefined {
    if (!cfg.master_sign_pubkey) return undefined;
    if (cfg.master_use_pubkey_signature) return new MasterPubSigner(cleanKey(readFileSync(signaturePath(cfg), "utf8")), undefined, pubClean);
    const pem = readFileSync(path.join(cfg.pki_dir, `${signKeyName(cfg)}.pem`), "utf8");
    return new MasterPubSigner(undefined, privateKey(pem), pubClean);
  }

  /** The `pub_sig` for a minion that asked for `algo`. */
  pubSig(algo: SigAlgo): string {
    if (this.fixed !== undefined) return this.fixed;
    let s = this.sigs.get(algo);
    if (s === undefined) {
      s = signPublicKeyText(this.key!, this.pubClean, algo);
      this.sigs.set(algo, s);
    }
    return s;
  }
}

/** Salt's `b2a_base64(sign_message(key, text, algo))`: one base64 line with a final newline. */
export function signPublicKeyText(key: KeyObject, text: string, algo: SigAlgo): string {
  return `${rsaSign(key, Buffer.from(text, "utf8"), algo).toString("base64")}\n`;
}
