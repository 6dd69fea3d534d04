/**
 * `salt-key --gen-signature`: which files it uses and Salt's answers (planGenSignature, table-tested), the
 * salt-key command on a master's pki directory (--auto-create, --pub, --priv, --signature-path, an existing
 * file left alone), and the proof that counts: a master with `master_use_pubkey_signature: True` sends that
 * file as `pub_sig`, and it passes the check a minion with verify_master_pubkey_sign makes (Salt's
 * verify_pubkey_sig: master_sign.pub over the reply's `pub_key`, SHA-1). A signature made as Salt 3007's
 * salt-key makes it (over master.pub with its trailing newline, saltstack/salt#68930) fails that check, and
 * the master warns about it at start. Byte-for-byte against Python's salt-key: test/interop/real-minion-signed-master.test.ts.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { planGenSignature, type GenSignatureRequest } from "../../src/lib/pki/gen-signature.js";
import { privateKey, publicKey, rsaSign, rsaVerify } from "../../src/shared/protocol/rsa.js";
import { cleanKey } from "../../src/shared/protocol/pem.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { MinionKeys, generateKeyPair } from "../../src/lib/minion/keys.js";
import { decodeWire, type WireValue } from "../../src/shared/protocol/msgpack.js";
import { startTestMaster } from "../helpers/master.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

const base: GenSignatureRequest = { pkiDir: "/pki", autoCreate: false, signKeyName: "master_sign", signatureName: "master_pubkey_signature" };
const files = (...f: string[]) => ({ isFile: (p: string) => f.includes(p), isDir: (p: string) => ["/pki", "/out"].includes(p) });

describe("salt-key --gen-signature: what Salt's gen_keys_signature decides", () => {
  const cases: { name: string; req: Partial<GenSignatureRequest>; have: string[]; want: unknown }[] = [
    { name: "no signing key and no --auto-create", req: {}, have: ["/pki/master.pub"], want: { type: "answer", answer: "No usable private-key found" } },
    {
      name: "the defaults: master.pub signed with master_sign.pem into pki_dir",
      req: {},
      have: ["/pki/master.pub", "/pki/master_sign.pem"],
      want: { type: "sign", pub: "/pki/master.pub", priv: "/pki/master_sign.pem", signatureFile: "/pki/master_pubkey_signature", signatureExists: false },
    },
    {
      name: "--auto-create makes the pair named by master_sign_key_name",
      req: { autoCreate: true, signKeyName: "mysign" },
      have: ["/pki/master.pub"],
      want: { type: "sign", pub: "/pki/master.pub", priv: "/pki/mysign.pem", createPair: { dir: "/pki", name: "mysign" }, signatureFile: "/pki/master_pubkey_signature", signatureExists: false },
    },
    { name: "an existing signature file is reported, not overwritten", req: {}, have: ["/pki/master.pub", "/pki/master_sign.pem", "/pki/master_pubkey_signature"], want: { type: "sign", pub: "/pki/master.pub", priv: "/pki/master_sign.pem", signatureFile: "/pki/master_pubkey_signature", signatureExists: true } },
    { name: "--pub that does not exist", req: { pub: "/x.pub" }, have: ["/pki/master.pub", "/pki/master_sign.pem"], want: { type: "answer", answer: "Public-key /x.pub does not exist" } },
    { name: "--priv that does not exist", req: { priv: "/x.pem" }, have: ["/pki/master.pub"], want: { type: "answer", answer: "Private-key /x.pem does not exist" } },
    { name: "no master.pub", req: {}, have: ["/pki/master_sign.pem"], want: { type: "answer", answer: "No usable public-key found" } },
    {
      name: "--pub, --priv and --signature-path with master_pubkey_signature's name",
      req: { pub: "/k.pub", priv: "/k.pem", signaturePath: "/out", signatureName: "sig" },
      have: ["/k.pub", "/k.pem"],
      want: { type: "sign", pub: "/k.pub", priv: "/k.pem", signatureFile: "/out/sig", signatureExists: false },
    },
    { name: "--signature-path that is not a directory", req: { signaturePath: "/nowhere" }, have: ["/pki/master.pub", "/pki/master_sign.pem"], want: { type: "error", message: "the signature directory /nowhere does not exist" } },
  ];
  for (const c of cases) test(c.name, () => assert.deepEqual(planGenSignature({ ...base, ...c.req }, files(...c.have)), c.want));
});

/** Salt's minion check of an accepted sign-in (crypt.AsyncAuth.verify_pubkey_sig): the signing key's public half over `pub_key`. */
function minionAccepts(signPubPem: string, reply: Record<string, WireValue>): boolean {
  return rsaVerify(publicKey(signPubPem), Buffer.from(String(reply.pub_key), "utf8"), Buffer.from(String(reply.pub_sig), "base64"), "PKCS1v15-SHA1");
}

async function signIn(port: number): Promise<Record<string, WireValue>> {
  const keys = new MinionKeys(await generateKeyPair(2048));
  const c = new RawClient({ host: "127.0.0.1", port, timeoutMs: 10_000 });
  try {
    const r = (await c.clear({ cmd: "_auth", id: "verifier", nonce: "0123456789abcdef0123456789abcdef", pub: keys.pub, enc_algo: "OAEP-SHA1", sig_algo: "PKCS1v15-SHA224" }, 3)) as Record<string, WireValue>;
    return decodeWire(r.load as Buffer) as Record<string, WireValue>;
  } finally {
    c.close();
  }
}

describe("salt-key --gen-signature on a master's pki directory", { timeout: 120_000 }, () => {
  test("makes the signature a verifying minion accepts from a master with master_use_pubkey_signature", async () => {
    const first = await startTestMaster({ auto_accept: true });
    const conf = writeConfigDir(first);
    const pki = first.pkiDir;
    const root = first.root;
    await first.stop(true);
    const key = (...a: string[]) => runCli("salt-key", ["-c", conf, ...a]);

    assert.equal((await key("--gen-signature")).stdout, "return:\n    No usable private-key found\n");
    const made = await key("--gen-signature", "--auto-create", "--keysize", "2048");
    assert.equal(made.stdout, "return:\n    True\n", made.stderr);
    for (const f of ["master_sign.pem", "master_sign.pub", "master_pubkey_signature"]) assert.ok(existsSync(path.join(pki, f)), f);
    assert.equal(statSync(path.join(pki, "master_sign.pem")).mode & 0o777, 0o400);
    const sigText = readFileSync(path.join(pki, "master_pubkey_signature"), "utf8");
    assert.match(sigText, /^[A-Za-z0-9+/]+=*\n$/, "one base64 line and a newline, as Python's b2a_base64");
    assert.equal((await key("--gen-signature", "--out", "json")).stdout.trim(), JSON.stringify({ return: false }, null, 4), "an existing file is left alone");
    assert.equal(readFileSync(path.join(pki, "master_pubkey_signature"), "utf8"), sigText);

    // --pub/--priv/--signature-path: another pair's signature, elsewhere
    const out = path.join(root, "sigs");
    mkdirSync(out);
    assert.equal((await key("--gen-signature", "--pub", path.join(pki, "master.pub"), "--priv", path.join(pki, "master.pem"), "--signature-path", out)).stdout, "return:\n    True\n");
    assert.ok(existsSync(path.join(out, "master_pubkey_signature")));
    const missingDir = await key("--gen-signature", "--signature-path", path.join(root, "nowhere"));
    assert.equal(missingDir.code, 1);
    assert.match(missingDir.stderr, /signature directory .*nowhere does not exist/);

    const signPub = readFileSync(path.join(pki, "master_sign.pub"), "utf8");
    const m = await startTestMaster({ auto_accept: true, master_sign_pubkey: true, master_use_pubkey_signature: true }, root);
    try {
      const reply = await signIn(m.retPort);
      assert.equal(reply.pub_sig, sigText.trim());
      assert.ok(minionAccepts(signPub, reply), "a minion holding master_sign.pub verifies the pre-made signature");
      assert.ok(!minionAccepts(readFileSync(path.join(pki, "master.pub"), "utf8"), reply), "and the check can fail: another key does not verify it");
    } finally {
      await m.stop();
    }
  });

  test("a signature made over master.pub with its trailing newline (Salt 3007's salt-key) fails the minion's check, and the master warns at start", async () => {
    const first = await startTestMaster({ auto_accept: true, master_sign_pubkey: true });
    const { pkiDir: pki, root } = first;
    await first.stop(true);
    const raw = readFileSync(path.join(pki, "master.pub"), "utf8");
    assert.ok(raw.endsWith("\n") && raw !== cleanKey(raw), "brine's master.pub ends with a newline, as the cryptography package writes it");
    const sig = rsaSign(privateKey(readFileSync(path.join(pki, "master_sign.pem"), "utf8")), Buffer.from(raw, "utf8"), "PKCS1v15-SHA1");
    writeFileSync(path.join(pki, "master_pubkey_signature"), sig.toString("base64") + "\n");
    const logFile = path.join(root, "master.log");
    const m = await startTestMaster({ auto_accept: true, master_sign_pubkey: true, master_use_pubkey_signature: true }, root, { logFile });
    try {
      const reply = await signIn(m.retPort);
      assert.equal(minionAccepts(readFileSync(path.join(pki, "master_sign.pub"), "utf8"), reply), false);
      assert.match(readFileSync(logFile, "utf8"), /signs master\.pub with its trailing newline .*saltstack\/salt#68930/);
    } finally {
      await m.stop();
    }
  });
});
