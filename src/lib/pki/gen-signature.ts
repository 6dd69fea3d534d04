/**
 * `salt-key --gen-signature` (Salt's Key.gen_keys_signature and crypt.gen_signature, 3006.8 and 3007.x): which
 * files it uses and what it answers, without I/O (the file system is asked through `FileLook`); salt-key does
 * the rest (src/cli/salt-key.ts).
 *
 * - the public key: `--pub`, else `pki_dir/master.pub`; the private key: `--priv`, else
 *   `pki_dir/master_sign.pem` (Salt looks for `master_sign.pem` whatever `master_sign_key_name` says), else with
 *   `--auto-create` a new pair `pki_dir/<master_sign_key_name>.pem/.pub` (keysize: `--keysize`, else the
 *   master's `keysize`);
 * - the signature goes to `<--signature-path or pki_dir>/<master_pubkey_signature>`; an existing file is never
 *   overwritten (Salt answers False);
 * - Salt's answers, shown as `return:` by salt-key: "Public-key <p> does not exist", "Private-key <p> does not
 *   exist", "No usable private-key found", "No usable public-key found", True, False.
 *
 * The signature (made by salt-key with master-sign.ts's signPublicKeyText): PKCS#1 v1.5 with SHA-1 over the public key's text as the master sends it in its sign-in reply
 * (Salt's clean_key: no trailing newline), base64 on one line with a final newline. Salt 3007.x's own salt-key
 * signs the file's raw text, trailing newline included, which no minion verifies against the reply's `pub_key`
 * (saltstack/salt#68930, fixed on 3006.x by #68934 and on 3007.x by #69650): brine makes what the fixed Salt
 * makes. For a public key file without a trailing newline (3006.8's own keys) both are the same bytes.
 */
import path from "node:path";

export interface GenSignatureRequest {
  pkiDir: string;
  /** --pub, --priv, --signature-path ("" or undefined: not given) */
  pub?: string;
  priv?: string;
  signaturePath?: string;
  autoCreate: boolean;
  /** master_sign_key_name (the name of an auto-created pair) and master_pubkey_signature (the file's name) */
  signKeyName: string;
  signatureName: string;
}

export interface FileLook {
  isFile(p: string): boolean;
  isDir(p: string): boolean;
}

export type GenSignaturePlan =
  /** Salt's answer without doing anything (a string, or False when the signature file exists) */
  | { type: "answer"; answer: string | false }
  /** the signature directory does not exist (Salt fails writing the file) */
  | { type: "error"; message: string }
  /** make the pair first when `createPair`; then write the signature unless the file exists (Salt answers False) */
  | { type: "sign"; pub: string; priv: string; createPair?: { dir: string; name: string }; signatureFile: string; signatureExists: boolean };

export function planGenSignature(r: GenSignatureRequest, fs: FileLook): GenSignaturePlan {
  let pub: string | undefined;
  if (r.pub) {
    if (!fs.isFile(r.pub)) return { type: "answer", answer: `Public-key ${r.pub} does not exist` };
    pub = r.pub;
  } else if (fs.isFile(path.join(r.pkiDir, "master.pub"))) pub = path.join(r.pkiDir, "master.pub");
  let priv: string | undefined;
  let createPair: { dir: string; name: string } | undefined;
  if (r.priv) {
    if (!fs.isFile(r.priv)) return { type: "answer", answer: `Private-key ${r.priv} does not exist` };
    priv = r.priv;
  } else if (fs.isFile(path.join(r.pkiDir, "master_sign.pem"))) priv = path.join(r.pkiDir, "master_sign.pem");
  if (!priv) {
    if (!r.autoCreate) return { type: "answer", answer: "No usable private-key found" };
    createPair = { dir: r.pkiDir, name: r.signKeyName };
    priv = path.join(r.pkiDir, `${r.signKeyName}.pem`);
  }
  if (!pub) return { type: "answer", answer: "No usable public-key found" };
  const dir = r.signaturePath || r.pkiDir;
  if (!fs.isDir(dir)) return { type: "error", message: `the signature directory ${dir} does not exist` };
  const signatureFile = path.join(dir, r.signatureName);
  return { type: "sign", pub, priv, ...(createPair ? { createPair } : {}), signatureFile, signatureExists: fs.isFile(signatureFile) };
}
