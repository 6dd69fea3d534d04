/** Test minions wired for speed against an in-process test master, and event waits. */
import os from "node:os";
import path from "node:path";
import { keyPool, type MinionKeys } from "../../src/lib/minion/keys.js";
import { TestMinion, type TestMinionOptions } from "../../src/lib/minion/test-minion.js";
import type { TestMaster } from "./master.js";
import { Crypticle } from "../../src/shared/protocol/crypticle.js";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import { packSalt, sealSalt } from "../../src/lib/minion/wire.js";

/** Shared across test files: RSA keys are slow to make, so the pool is generated once per machine. */
export const TEST_KEY_DIR = path.join(os.tmpdir(), "brine-test-minion-keys");

export async function testKeys(n: number): Promise<MinionKeys[]> {
  return (await keyPool(n, { dir: TEST_KEY_DIR })).keys;
}

export function fastMinion(tm: TestMaster, id: string, keys: MinionKeys, extra: Partial<TestMinionOptions> = {}): TestMinion {
  return new TestMinion({
    id,
    master: "127.0.0.1",
    retPort: tm.retPort,
    keys,
    acceptanceWaitMs: 100,
    randomReauthDelayMs: 0,
    reconDefaultMs: 50,
    reconMaxMs: 100,
    authTimeoutMs: 3000,
    requestTimeoutMs: 5000,
    ...extra,
  });
}

type Ev = "return" | "auth" | "reauth" | "badLoad" | "publish";

/** Resolve with the first `name` event whose payload satisfies `pred`, or reject after `ms`. */
export function waitForEvent<T = any>(m: TestMinion, name: Ev, pred: (x: any) => boolean = () => true, ms = 15_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const on = (x: any) => {
      if (!pred(x)) return;
      clearTimeout(t);
      m.off(name, on);
      resolve(x);
    };
    const t = setTimeout(() => {
      m.off(name, on);
      reject(new Error(`${m.id}: no ${name} within ${ms} ms`));
    }, ms);
    m.on(name, on);
  });
}

/**
 * A v3 AES request frame of a signed-in minion, built by hand (what a raw client sends back to back so that the
 * request port batches several on one turn): `load` plus the id, a fresh nonce, the time and the minion's tok.
 */
export function v3RequestFrame(m: TestMinion, keys: MinionKeys, load: Record<string, unknown>): Buffer {
  const inner = { ...load, id: m.id, nonce: newNonce(), ts: Math.floor(Date.now() / 1000), tok: keys.tok };
  return packSalt({ enc: "aes", load: sealSalt(new Crypticle(m.creds!.session!), inner), version: 3, id: m.id, enc_algo: "OAEP-SHA1", sig_algo: "PKCS1v15-SHA1" });
}
