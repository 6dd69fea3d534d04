/**
 * A public key's PEM parsed by walking its DER (rsa.ts parsePublicKey) is the key OpenSSL decodes from the same
 * text, and anything the walk does not take whole goes to OpenSSL, so no input is taken that OpenSSL refuses.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createPublicKey, generateKeyPairSync, randomInt } from "node:crypto";
import { cachedPublicKeys, parsePublicKey, publicKey, publicKeyCacheEntriesMax, rsaPublicJwk } from "../../src/shared/protocol/rsa.js";
import { isBrineError } from "../../src/shared/errors.js";

const pemOf = (der: Buffer, label: string) => `-----BEGIN ${label}-----\n${der.toString("base64").match(/.{1,64}/g)!.join("\n")}\n-----END ${label}-----\n`;
const jwkOf = (k: ReturnType<typeof createPublicKey>) => JSON.stringify(k.export({ format: "jwk" }));

/** What OpenSSL makes of a PEM: the key's JWK, or "refused". */
function openssl(pem: string): string {
  try {
    const k = createPublicKey(pem);
    return k.asymmetricKeyType === "rsa" ? jwkOf(k) : `a ${k.asymmetricKeyType} key`;
  } catch {
    return "refused";
  }
}
function ours(pem: string): string {
  try {
    const k = parsePublicKey(pem);
    return k.asymmetricKeyType === "rsa" ? jwkOf(k) : `a ${k.asymmetricKeyType} key`;
  } catch (e) {
    assert.ok(isBrineError(e, "RSA_BAD_KEY"), String(e));
    return "refused";
  }
}

const keys = [1024, 2048, 3072, 4096].map((bits) => generateKeyPairSync("rsa", { modulusLength: bits }).publicKey);
keys.push(generateKeyPairSync("rsa", { modulusLength: 2048, publicExponent: 3 }).publicKey);

test("an RSA public key in SubjectPublicKeyInfo or PKCS#1 PEM is read from its DER as the same key OpenSSL reads", () => {
  for (const k of keys) {
    for (const pem of [k.export({ type: "spki", format: "pem" }) as string, k.export({ type: "pkcs1", format: "pem" }) as string]) {
      assert.ok(rsaPublicJwk(pem), `the walk takes ${pem.slice(0, 30)}`);
      assert.equal(ours(pem), jwkOf(k));
      assert.equal(ours(pem.replace(/\n/g, "\r\n")), jwkOf(k), "CRLF lines as a Windows minion may write them");
    }
  }
});

test("a PEM the walk does not take whole is decided by OpenSSL: other key types, private keys, damaged or non-canonical DER", () => {
  const k = keys[1]!;
  const spki = k.export({ type: "spki", format: "der" });
  const pkcs1 = k.export({ type: "pkcs1", format: "der" });
  const ec = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const cases: [string, string][] = [
    ["EC public key", ec.publicKey.export({ type: "spki", format: "pem" }) as string],
    ["RSA private key", generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey.export({ type: "pkcs8", format: "pem" }) as string],
    ["cut short", pemOf(spki.subarray(0, spki.length - 9), "PUBLIC KEY")],
    ["a byte after the key", pemOf(Buffer.concat([spki, Buffer.from([0])]), "PUBLIC KEY")],
    ["PKCS#1 body under the SPKI label", pemOf(pkcs1, "PUBLIC KEY")],
    ["SPKI body under the PKCS#1 label", pemOf(spki, "RSA PUBLIC KEY")],
    ["mismatched labels", pemOf(spki, "PUBLIC KEY").replace("END PUBLIC", "END RSA PUBLIC")],
    ["n negative (its 0x00 pad removed)", (() => {
      const b = Buffer.from(pkcs1);
      // 30 82 01 0a 02 82 01 01 00 <n...>: drop the pad and shorten the lengths by one
      const out = Buffer.concat([Buffer.from([0x30, 0x82, 0x01, 0x09, 0x02, 0x82, 0x01, 0x00]), b.subarray(9)]);
      return pemOf(out, "RSA PUBLIC KEY");
    })()],
    ["n with a needless 0x00", (() => {
      const b = Buffer.from(pkcs1);
      const out = Buffer.concat([Buffer.from([0x30, 0x82, 0x01, 0x0b, 0x02, 0x82, 0x01, 0x02, 0x00]), b.subarray(8)]);
      return pemOf(out, "RSA PUBLIC KEY");
    })()],
    ["a long-form length where the short form is due", (() => {
      const b = Buffer.from(pkcs1);
      const e = b.subarray(b.length - 5); // 02 03 01 00 01
      const out = Buffer.concat([Buffer.from([0x30, 0x82, 0x01, 0x0b]), b.subarray(4, b.length - 5), Buffer.from([0x02, 0x81, 0x03]), e.subarray(2)]);
      return pemOf(out, "RSA PUBLIC KEY");
    })()],
    ["base64 with a stray character", pemOf(spki, "PUBLIC KEY").replace("\n-----END", "A\n-----END")],
    ["empty body", "-----BEGIN PUBLIC KEY-----\n\n-----END PUBLIC KEY-----\n"],
  ];
  for (const [what, pem] of cases) {
    assert.equal(rsaPublicJwk(pem), undefined, `the walk leaves ${what} to OpenSSL`);
    assert.equal(ours(pem), openssl(pem), what);
  }
});

test("no damaged key is taken that OpenSSL refuses, and a damaged key either takes is the same key (random byte changes)", () => {
  for (const k of [keys[0]!, keys[1]!]) {
    for (const type of ["spki", "pkcs1"] as const) {
      const der = k.export({ type, format: "der" });
      const label = type === "spki" ? "PUBLIC KEY" : "RSA PUBLIC KEY";
      for (let i = 0; i < 300; i++) {
        const b = Buffer.from(der);
        const at = randomInt(b.length);
        b[at] = i % 3 === 0 ? b[at]! ^ (1 << randomInt(8)) : randomInt(256);
        const pem = pemOf(b, label);
        assert.equal(ours(pem), openssl(pem), `${type} byte ${at} set to ${b[at]}`);
      }
    }
  }
});

test("a thread keeps at most publicKeyCacheEntriesMax parsed public keys, the least recently used going first", () => {
  const pem = keys[1]!.export({ type: "spki", format: "pem" }) as string;
  const first = publicKey(pem);
  for (let i = 1; i <= publicKeyCacheEntriesMax + 50; i++) {
    publicKey(pem + " ".repeat(i)); // the same key under other texts: other entries
    if (i % 100 === 0) assert.equal(publicKey(pem), first, "a key in use stays cached");
  }
  assert.ok(cachedPublicKeys() <= publicKeyCacheEntriesMax, `${cachedPublicKeys()} kept`);
  assert.equal(publicKey(pem), first);
  assert.notEqual(publicKey(pem + " "), undefined);
});
