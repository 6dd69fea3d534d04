/**
 * A minion's public key must be an RSA public key PEM with e = 65537 and a 2048..16384-bit modulus unless
 * configured otherwise (issue 13). Python master: stores whatever `pub` holds in minions_pre, and
 * `salt-key -p` prints a private key someone sent. Refused keys leave nothing under pki_dir.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { decodeWire, isMap, type WireValue } from "../../src/shared/protocol/msgpack.js";
import { checkMinionPublicKey } from "../../src/lib/pki/minion-key-check.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { testKeys } from "../helpers/minions.js";

const policy = { keyBitsMin: 2048, keyBitsMax: 16384, keyExponent: 65537 };

/** An RSA public key with any exponent and size (node makes e = 1 impossible: build the DER by hand). */
function rsaSpkiPem(modulus: Buffer, e: number): string {
  const int = (b: Buffer) => {
    const v = b[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b;
    return Buffer.concat([Buffer.from([0x02]), len(v.length), v]);
  };
  const len = (n: number) => (n < 128 ? Buffer.from([n]) : n < 256 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 255]));
  const seq = (...p: Buffer[]) => {
    const body = Buffer.concat(p);
    return Buffer.concat([Buffer.from([0x30]), len(body.length), body]);
  };
  const eb = Buffer.from(e.toString(16).padStart(2, "0").replace(/^(.(..)*)$/, "0$1"), "hex");
  const pkcs1 = seq(int(modulus), int(eb));
  const algo = Buffer.from("300d06092a864886f70d0101010500", "hex");
  const spki = seq(algo, Buffer.concat([Buffer.from([0x03]), len(pkcs1.length + 1), Buffer.from([0]), pkcs1]));
  return `-----BEGIN PUBLIC KEY-----\n${spki.toString("base64").match(/.{1,64}/g)!.join("\n")}\n-----END PUBLIC KEY-----\n`;
}

describe("minion public key policy", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let raw: RawClient;
  const good = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const bad: [string, string][] = [];

  before(async () => {
    tm = await startTestMaster({ auto_accept: true, brine_auth_stale_ms: 60_000 }); // raw sign-ins on a loaded box are not "stale"
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 10_000 });
    const modulus = (good.publicKey.export({ format: "jwk" }) as { n: string }).n;
    bad.push(
      ["a private key PEM (PKCS#1)", good.privateKey.export({ type: "pkcs1", format: "pem" }) as string],
      ["a private key PEM (PKCS#8)", good.privateKey.export({ type: "pkcs8", format: "pem" }) as string],
      ["e = 1", rsaSpkiPem(Buffer.from(modulus, "base64url"), 1)],
      ["e = 3", rsaSpkiPem(Buffer.from(modulus, "base64url"), 3)],
      ["a 512-bit key", generateKeyPairSync("rsa", { modulusLength: 512 }).publicKey.export({ type: "spki", format: "pem" }) as string],
      ["a 1024-bit key", generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ type: "spki", format: "pem" }) as string],
      ["an EC key", generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ type: "spki", format: "pem" }) as string],
      ["a public key followed by a private key", (good.publicKey.export({ type: "spki", format: "pem" }) as string) + (good.privateKey.export({ type: "pkcs1", format: "pem" }) as string)],
      ["garbage in a PEM frame", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"],
    );
  });
  after(async () => {
    raw.close();
    await tm.stop();
  });

  const ret = (r: WireValue): unknown => {
    assert.ok(isMap(r));
    const load = isMap(r.load) ? r.load : decodeWire(r.load as Buffer);
    return isMap(load) ? ("aes" in load ? "accepted" : load.ret) : undefined;
  };
  const auth = (id: string, pub: string) => raw.clear({ cmd: "_auth", id, nonce: "0".repeat(32), pub, enc_algo: "OAEP-SHA1", sig_algo: "PKCS1v15-SHA1" });

  test("a private key PEM, e = 1, e = 3, a 512- or 1024-bit key, an EC key, a key with a private key appended: refused, nothing written under pki_dir", async () => {
    for (const [i, [what, pem]] of bad.entries()) {
      assert.equal(ret(await auth(`badkey${i}`, pem)), false, what);
      assert.equal(checkMinionPublicKey(pem, policy).ok, false, what);
    }
    for (const dir of ["minions", "minions_pre", "minions_rejected", "minions_denied"]) {
      assert.deepEqual(readdirSync(path.join(tm.pkiDir, dir)).filter((n) => n.startsWith("badkey")), [], dir);
    }
  });

  test("RSA public keys as SPKI and PKCS#1 PEM, 2048 and 4096 bits, are taken", async () => {
    const k = await testKeys(1);
    assert.equal(ret(await auth("okkey-spki", k[0]!.pub)), "accepted");
    const pkcs1 = good.publicKey.export({ type: "pkcs1", format: "pem" }) as string;
    assert.equal(checkMinionPublicKey(pkcs1, policy).ok, true);
    const big = generateKeyPairSync("rsa", { modulusLength: 4096 }).publicKey.export({ type: "spki", format: "pem" }) as string;
    assert.equal(checkMinionPublicKey(big, policy).ok, true);
    assert.equal(checkMinionPublicKey(big, { ...policy, keyBitsMax: 3072 }).ok, false);
  });

  test("an accepted key the policy refuses is refused at every sign-in; an acceptable one is taken at every sign-in, sent with or without its trailing newline or with CRLF line ends", async () => {
    // a request thread remembers the accepted keys it found acceptable (auth.ts): never one it refused
    const weak = generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ type: "spki", format: "pem" }) as string;
    writeFileSync(path.join(tm.pkiDir, "minions", "weak-accepted"), weak);
    for (let i = 0; i < 6; i++) assert.equal(ret(await auth("weak-accepted", weak)), false, `sign-in ${i + 1} with an accepted 1024-bit key`);
    const k = (await testKeys(1))[0]!.pub;
    const lines = k.trim().split("\n");
    const forms = [lines.join("\n"), lines.join("\n") + "\n", lines.join("\r\n") + "\r\n", "  " + lines.join("\n") + "\n\n"];
    for (let i = 0; i < 12; i++) assert.equal(ret(await auth("good-returning", forms[i % forms.length]!)), "accepted", `sign-in ${i + 1}, form ${i % forms.length}`);
    assert.deepEqual(readdirSync(path.join(tm.pkiDir, "minions_denied")).filter((n) => n === "good-returning"), [], "the same key in another form is the same key (clean_key)");
  });

  test("a bad key option stops the start with CONFIG_INVALID naming it", async () => {
    await assert.rejects(startTestMaster({ brine_minion_key_bits_min: 100 } as never), /brine_minion_key_bits_min/);
  });
});
