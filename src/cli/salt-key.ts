/**
 * salt-key: manage minion keys in the pki directory (works with the master stopped or running; a
 * running master is told so it fires `salt/key`). Deleting a key writes the AES rotation drop file.
 * `--gen-signature` (with `--pub`, `--priv`, `--signature-path`, `--auto-create`, `--keysize`) writes the
 * signature of the master's public key that `master_use_pubkey_signature` sends (src/lib/pki/gen-signature.ts).
 */
import { Command } from "commander";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { keyStoreFor, type KeyState } from "../lib/pki/key-store.js";
import { KEY_EVENT_TAG, applyKeyAct, fileFinger, keyEventData, localKeyFiles, matchKeys, minionKeyFinger, writeDropFile, type KeyAct } from "../lib/pki/key-actions.js";
import { controlCall } from "../lib/client/control-client.js";
import { CONTROL_SOCKET } from "../shared/socket-names.js";
import { formatResult, OUTPUTTERS, type OutName } from "../lib/output/outputters.js";
import { loadOrCreateKeyPair } from "../lib/pki/master-keys.js";
import { planGenSignature } from "../lib/pki/gen-signature.js";
import { signPublicKeyText } from "../lib/pki/master-sign.js";
import { cleanKey } from "../shared/protocol/pem.js";
import { privateKey } from "../shared/protocol/rsa.js";
import { DEFAULT_CONFIG_DIR, exitWith, loadConfigOrExit, setupCliLogging } from "./common.js";

const program = new Command("salt-key")
  .description("Manage Salt minion keys")
  .option("-c, --config-dir <dir>", "directory holding the master config", DEFAULT_CONFIG_DIR)
  .option("-L, --list-all", "list all keys")
  .option("-l, --list <state>", "list keys in a state: pre/un/unaccepted, acc/accepted, rej/rejected, den/denied, all")
  .option("-a, --accept <glob>", "accept the matching pending keys")
  .option("-A, --accept-all", "accept all pending keys")
  .option("-r, --reject <glob>", "reject the matching pending keys")
  .option("-R, --reject-all", "reject all pending keys")
  .option("-d, --delete <glob>", "delete the matching keys")
  .option("-D, --delete-all", "delete all keys")
  .option("-f, --finger <glob>", "print the fingerprints of the matching keys")
  .option("-F, --finger-all", "print all fingerprints")
  .option("-p, --print <glob>", "print the matching public keys")
  .option("-P, --print-all", "print all public keys")
  .option("--include-rejected", "accept/reject also acts on rejected keys")
  .option("--include-denied", "accept/reject also acts on denied keys")
  .option("--include-all", "accept/reject also acts on rejected and denied keys")
  .option("-y, --yes", "answer yes to every question")
  .option("--gen-signature", "write the signature of the master's public key (master_pubkey_signature) that master_use_pubkey_signature sends")
  .option("--priv <file>", "--gen-signature: the private key to sign with (default: pki_dir/master_sign.pem)")
  .option("--pub <file>", "--gen-signature: the public key to sign (default: pki_dir/master.pub)")
  .option("--signature-path <dir>", "--gen-signature: the directory to write the signature file in (default: pki_dir)")
  .option("--auto-create", "--gen-signature: make the signing key pair (master_sign_key_name) when there is none")
  .option("--keysize <bits>", "--auto-create: the size of the new signing key (default: the master's keysize)")
  .option("--out <outputter>", `output format: ${OUTPUTTERS.join(", ")}`)
  .option("-l-level, --log-level <level>", "console log level", "warning");
program.parse();
const o = program.opts();
setupCliLogging(o.logLevel);
const cfg = loadConfigOrExit(o.configDir);
// clustered: the minion keys every master shares, in cluster_pki_dir
const store = keyStoreFor(cfg);
const TITLES: Record<KeyState, string> = { accepted: "Accepted Keys", denied: "Denied Keys", pending: "Unaccepted Keys", rejected: "Rejected Keys" };
const ORDER: KeyState[] = ["accepted", "denied", "pending", "rejected"];
const OUTKEYS: Record<KeyState, string> = { accepted: "minions", denied: "minions_denied", pending: "minions_pre", rejected: "minions_rejected" };

function stateOf(word: string): KeyState[] {
  const w = word.toLowerCase();
  if (["pre", "un", "unaccepted"].includes(w)) return ["pending"];
  if (["acc", "accepted"].includes(w)) return ["accepted"];
  if (["rej", "rejected"].includes(w)) return ["rejected"];
  if (["den", "denied"].includes(w)) return ["denied"];
  if (w === "all") return ORDER;
  process.stderr.write(`"${word}" is not a valid key state\n`);
  process.exit(2);
}

function listing(states: KeyState[], fmt: (s: KeyState, id: string) => string): void {
  if (o.out) {
    const data: Record<string, string[]> = {};
    for (const s of states) data[OUTKEYS[s]] = store.list(s);
    process.stdout.write(formatResult(o.out as OutName, data) + "\n");
    return;
  }
  for (const s of states) {
    process.stdout.write(`${TITLES[s]}:\n`);
    for (const id of store.list(s)) process.stdout.write(fmt(s, id) + "\n");
  }
}

function matching(states: KeyState[], glob: string): { state: KeyState; id: string }[] {
  return matchKeys(store, states, [glob]);
}

async function confirm(question: string): Promise<boolean> {
  if (o.yes) return true;
  process.stdout.write(question);
  const rl = createInterface({ input: process.stdin });
  const line: string = await new Promise((r) => {
    rl.once("line", r);
    rl.once("close", () => r(""));
  });
  rl.close();
  return /^y(es)?$/i.test(line.trim()) || line.trim() === "";
}

async function tellMaster(act: KeyAct, id: string): Promise<void> {
  if (!existsSync(path.join(cfg.sock_dir, CONTROL_SOCKET))) return;
  await controlCall(cfg.sock_dir, { op: "fire", tag: KEY_EVENT_TAG, data: keyEventData(act, id) }).catch(() => undefined);
}

function printTargets(title: string, targets: { state: KeyState; id: string }[]): void {
  process.stdout.write(`${title}\n`);
  for (const s of ORDER) {
    const ids = targets.filter((t) => t.state === s).map((t) => t.id);
    if (ids.length) process.stdout.write(`${TITLES[s]}:\n${ids.join("\n")}\n`);
  }
}

async function act(kind: "accept" | "reject" | "delete", glob: string): Promise<number> {
  const extra: KeyState[] = o.includeAll ? ["rejected", "denied"] : [...(o.includeRejected ? (["rejected"] as KeyState[]) : []), ...(o.includeDenied ? (["denied"] as KeyState[]) : [])];
  const from: KeyState[] =
    kind === "accept" ? ["pending", ...extra.filter((s) => s !== "accepted")] : kind === "reject" ? ["pending", ...extra.filter((s) => s !== "rejected")].map((s) => (s === "rejected" ? "accepted" : s)) as KeyState[] : ORDER;
  const targets = matching(kind === "reject" && (o.includeAll || o.includeRejected) ? ["pending", "accepted", ...(o.includeDenied || o.includeAll ? (["denied"] as KeyState[]) : [])] : from, glob);
  if (targets.length === 0) {
    process.stdout.write(kind === "delete" ? "The key glob '" + glob + "' does not match any accepted, unaccepted or rejected keys.\n" : `The key glob '${glob}' does not match any unaccepted keys.\n`);
    return 1;
  }
  const verb = kind === "accept" ? "accepted" : kind === "reject" ? "rejected" : "deleted";
  if (!o.yes) printTargets(`The following keys are going to be ${verb}:`, targets);
  if (!(await confirm("Proceed? [n/Y] "))) return 1;
  for (const t of targets) {
    if (!applyKeyAct(store, cfg, kind, t) && kind !== "delete") continue;
    process.stdout.write(`Key for minion ${t.id} ${verb}.\n`);
    await tellMaster(kind, t.id);
  }
  if (kind === "delete" && cfg.rotate_aes_key) writeDropFile(cfg);
  return 0;
}

function finger(glob: string): void {
  if (glob === "*") {
    process.stdout.write("Local Keys:\n");
    for (const p of localKeyFiles(cfg)) process.stdout.write(`${path.basename(p)}:  ${fileFinger(p, cfg.hash_type)}\n`);
  }
  for (const s of ORDER) {
    const ids = matching([s], glob);
    if (!ids.length) continue;
    process.stdout.write(`${TITLES[s]}:\n`);
    for (const { id } of ids) process.stdout.write(`${id}:  ${minionKeyFinger(store, s, id, cfg.hash_type)}\n`);
  }
}

function printKeys(glob: string): void {
  for (const s of ORDER) {
    const ids = matching([s], glob);
    if (!ids.length) continue;
    process.stdout.write(`${TITLES[s]}:\n`);
    for (const { id } of ids) process.stdout.write(`${id}:  ${store.read(s, id) ?? ""}\n`);
  }
}

const isFile = (p: string) => statSync(p, { throwIfNoEntry: false })?.isFile() ?? false;
const isDir = (p: string) => statSync(p, { throwIfNoEntry: false })?.isDirectory() ?? false;

/** Salt's answer as salt-key shows it: `{return: <answer>}` through the key outputter, or `--out`. */
function showAnswer(answer: string | boolean): void {
  if (o.out) process.stdout.write(formatResult(o.out as OutName, { return: answer }) + "\n");
  else process.stdout.write(`return:\n    ${answer === true ? "True" : answer === false ? "False" : answer}\n`);
}

/** --gen-signature (see src/lib/pki/gen-signature.ts for what Salt does and where brine differs). */
function genSignature(): number {
  const keysize = o.keysize === undefined ? cfg.keysize : Number(o.keysize);
  if (!Number.isInteger(keysize) || keysize < 2048 || keysize > 16384) {
    process.stderr.write(`Error: --keysize must be a number of bits from 2048 to 16384 (got ${String(o.keysize)})\n`);
    return 2;
  }
  const plan = planGenSignature(
    {
      pkiDir: cfg.pki_dir,
      pub: o.pub,
      priv: o.priv,
      signaturePath: o.signaturePath,
      autoCreate: Boolean(o.autoCreate),
      signKeyName: cfg.master_sign_key_name ?? "master_sign",
      signatureName: cfg.master_pubkey_signature ?? "master_pubkey_signature",
    },
    { isFile, isDir },
  );
  if (plan.type === "error") {
    process.stderr.write(`Error: ${plan.message}\n`);
    return 1;
  }
  if (plan.type === "answer") {
    showAnswer(plan.answer);
    return 0;
  }
  try {
    if (plan.createPair) loadOrCreateKeyPair(plan.createPair.dir, plan.createPair.name, keysize);
    if (plan.signatureExists) {
      showAnswer(false);
      return 0;
    }
    const text = signPublicKeyText(privateKey(readFileSync(plan.priv, "utf8")), cleanKey(readFileSync(plan.pub, "utf8")), "PKCS1v15-SHA1");
    writeFileSync(plan.signatureFile, text, { mode: 0o644, flag: "wx" });
  } catch (e) {
    process.stderr.write(`Error: ${(e as Error).message}\n`);
    return 1;
  }
  showAnswer(true);
  return 0;
}

async function main(): Promise<number> {
  if (o.genSignature) return genSignature();
  if (o.accept || o.acceptAll) return act("accept", o.accept ?? "*");
  if (o.reject || o.rejectAll) return act("reject", o.reject ?? "*");
  if (o.delete || o.deleteAll) return act("delete", o.delete ?? "*");
  if (o.finger || o.fingerAll) {
    finger(o.finger ?? "*");
    return 0;
  }
  if (o.print || o.printAll) {
    printKeys(o.print ?? "*");
    return 0;
  }
  if (o.list) {
    listing(stateOf(o.list), (_s, id) => id);
    return 0;
  }
  listing(ORDER, (_s, id) => id);
  return 0;
}

main().then((c) => exitWith(c));
