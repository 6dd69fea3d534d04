/**
 * master_sign_pubkey: the `pub_sig` of accepted sign-ins, against golden `_auth` replies of the Python master
 * (test/fixtures/master-sign/, 3007.x): the signature over the same master.pub with the same signing pair is
 * the same bytes, for SHA-1, SHA-224 and a 3006.8-style request without sig_algo; the signing pair is made at
 * start when missing; master_use_pubkey_signature sends the pre-made file and refuses to start without it.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { privateKey } from "../../src/shared/protocol/rsa.js";
import { signPublicKeyText } from "../../src/lib/pki/master-sign.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { MinionKeys, generateKeyPair } from "../../src/lib/minion/keys.js";
import { decodeWire, type WireValue } from "../../src/shared/protocol/msgpack.js";
import { isBrineError } from "../../src/shared/errors.js";
import { repoRoot } from "../helpers/paths.js";
import { startTestMaster } from "../helpers/master.js";

const FIX = path.join(repoRoot, "test", "fixtures", "master-sign");
interface Golden {
  envelope_version: number;
  sig_algo_sent: "PKCS1v15-SHA1" | "PKCS1v15-SHA224" | null;
  pub_key: string;
  pub_sig: string;
  reply_keys: string[];
}
const golden = JSON.parse(readFileSync(path.join(FIX, "auth-replies.json"), "utf8")) as Record<string, Golden>;

function pkiWithFixtureKeys(): string {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-sign-"));
  const pki = path.join(root, "pki", "master");
  mkdirSync(pki, { recursive: true });
  for (const f of ["master.pem", "master.pub", "master_sign.pem", "master_sign.pub"]) copyFileSync(path.join(FIX, "pki", f), path.join(pki, f));
  return root;
}

async function signIn(port: number, g: Pick<Golden, "envelope_version" | "sig_algo_sent">, id: string): Promise<Record<string, WireValue>> {
  const keys = new MinionKeys(await generateKeyPair(2048));
  const c = new RawClient({ host: "127.0.0.1", port, timeoutMs: 10_000 });
  try {
    const load: Record<string, unknown> = { cmd: "_auth", id, nonce: "0123456789abcdef0123456789abcdef", pub: keys.pub };
    if (g.sig_algo_sent) Object.assign(load, { enc_algo: "OAEP-SHA1", sig_algo: g.sig_algo_sent });
    const r = (await c.clear(load, g.envelope_version)) as Record<string, WireValue>;
    assert.ok(Buffer.isBuffer(r.load), "a signed reply");
    return decodeWire(r.load as Buffer) as Record<string, WireValue>;
  } finally {
    c.close();
  }
}

describe("master public key signature (master_sign_pubkey)", { timeout: 120_000 }, () => {
  test("the signature of the golden pub_key with the golden signing key equals the Python master's, per sig_algo", () => {
    const key = privateKey(readFileSync(path.join(FIX, "pki", "master_sign.pem"), "utf8"));
    for (const [name, g] of Object.entries(golden)) {
      assert.equal(signPublicKeyText(key, g.pub_key, g.sig_algo_sent ?? "PKCS1v15-SHA1"), g.pub_sig, name);
    }
    // a different signing key gives another signature (what the minion refuses)
    const other = privateKey(readFileSync(path.join(FIX, "pki", "master.pem"), "utf8"));
    assert.notEqual(signPublicKeyText(other, golden["v3-sha1"]!.pub_key, "PKCS1v15-SHA1"), golden["v3-sha1"]!.pub_sig);
  });

  test("brine's accepted sign-in replies carry the Python master's pub_sig, in Salt's key order", async () => {
    const root = pkiWithFixtureKeys();
    const m = await startTestMaster({ auto_accept: true, master_sign_pubkey: true }, root);
    try {
      for (const [name, g] of Object.entries(golden)) {
        const p = await signIn(m.retPort, g, `m-${name}`);
        assert.equal(p.pub_key, g.pub_key, name);
        assert.equal(p.pub_sig, g.pub_sig, name);
        const order = Object.keys(p).filter((k) => g.reply_keys.includes(k));
        assert.deepEqual(order, g.reply_keys.filter((k) => k in p), `${name}: key order`);
      }
    } finally {
      await m.stop();
    }
  });

  test("without master_sign_pubkey no pub_sig is sent (a verifying minion refuses such a master)", async () => {
    const root = pkiWithFixtureKeys();
    const m = await startTestMaster({ auto_accept: true }, root);
    try {
      const p = await signIn(m.retPort, golden["v3-sha1"]!, "plain");
      assert.ok(!("pub_sig" in p));
    } finally {
      await m.stop();
    }
  });

  test("a missing signing pair is generated at start (named by master_sign_key_name)", async () => {
    const m = await startTestMaster({ auto_accept: true, master_sign_pubkey: true, master_sign_key_name: "mysign" });
    try {
      assert.ok(existsSync(path.join(m.pkiDir, "mysign.pem")) && existsSync(path.join(m.pkiDir, "mysign.pub")));
      const p = await signIn(m.retPort, golden["v3-sha224"]!, "gen");
      const key = privateKey(readFileSync(path.join(m.pkiDir, "mysign.pem"), "utf8"));
      assert.equal(p.pub_sig, signPublicKeyText(key, p.pub_key as string, "PKCS1v15-SHA224"));
    } finally {
      await m.stop();
    }
  });

  test("master_use_pubkey_signature sends the pre-made signature file; without the file the master does not start", async () => {
    const root = pkiWithFixtureKeys();
    await assert.rejects(
      startTestMaster({ master_sign_pubkey: true, master_use_pubkey_signature: true, master_pubkey_signature: "my_sig" }, root),
      (e) => isBrineError(e, "MASTER_SIGN") && /my_sig/.test((e as Error).message),
    );
    writeFileSync(path.join(root, "pki", "master", "my_sig"), `${golden["v3-sha1"]!.pub_sig}`);
    const m = await startTestMaster({ auto_accept: true, master_sign_pubkey: true, master_use_pubkey_signature: true, master_pubkey_signature: "my_sig" }, root);
    try {
      const p = await signIn(m.retPort, golden["v3-sha224"]!, "file");
      assert.equal(p.pub_sig, golden["v3-sha1"]!.pub_sig.trim(), "clean_key of the file, whatever the sig_algo");
    } finally {
      await m.stop();
    }
  });
});
