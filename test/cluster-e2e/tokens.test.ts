/**
 * eauth tokens are shared by every master of a cluster (issue #12): three masters behind HAProxy, each with its
 * own `cachedir` (its own LMDB). A client that logged in on master 1 is served by masters 2 and 3 (a balancer
 * may send its next request anywhere), and a logout on master 3 is refused everywhere at once.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { isMap, type WireValue } from "../../src/shared/protocol/msgpack.js";
import { ClusterHarness, RET_PORT, clusterPrerequisites, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.90";
const HOSTS = ["127.0.0.91", "127.0.0.92", "127.0.0.93"];
const SECRET = "s3cret-shared-secret-for-the-cluster";

test("a token made on one master works on every master, and revoked on one is refused on all", { timeout: 180_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({
    lbHost: LB,
    hosts: HOSTS,
    clusterId: "brine-tokens",
    privateCachedir: true,
    extra: { sharedsecret: SECRET, external_auth: { sharedsecret: { ops: ["@runner", ".*"] } } },
  });
  const raws = HOSTS.map((host) => new RawClient({ host, port: RET_PORT, timeoutMs: 10_000 }));
  const runner = async (i: number, token: string) => (await raws[i]!.clear({ cmd: "runner", fun: "jobs.list_jobs", kwarg: {}, token })) as Record<string, any>;
  const publish = async (i: number, token: string) =>
    (await raws[i]!.clear({ cmd: "publish", tgt: "*", fun: "test.ping", arg: [], tgt_type: "glob", ret: "", jid: "", user: "salt-api", kwargs: { token } })) as Record<string, any>;
  try {
    await h.waitLeader([0, 1, 2], 3);
    const made: WireValue = await raws[0]!.clear({ cmd: "mk_token", eauth: "sharedsecret", username: "ops", password: SECRET });
    assert.ok(isMap(made), `mk_token answered ${JSON.stringify(made)}`);
    const token = String((made as Record<string, unknown>).token);
    assert.match(token, /^[0-9a-f]{64}$/);

    for (const i of [1, 2]) {
      const r = await until(`master ${i + 1} to accept the token`, async () => {
        const x = await runner(i, token);
        return x.error === undefined ? x : undefined;
      }, 10_000, 100);
      assert.match(String(r.jid), /^\d{20}$/, `a runner on master ${i + 1}: ${JSON.stringify(r)}`);
      const p = await publish(i, token);
      assert.equal(p.error, undefined, `a publish on master ${i + 1}: ${JSON.stringify(p)}`);
      assert.equal(((await raws[i]!.clear({ cmd: "get_token", token })) as Record<string, unknown>).name, "ops");
    }

    assert.equal(await raws[2]!.clear({ cmd: "rm_token", token }), true, "logout on master 3");
    const revokedAt = Date.now();
    for (const i of [0, 1]) {
      await until(`master ${i + 1} to refuse the revoked token`, async () => ((await runner(i, token)).error?.name === "TokenAuthenticationError" ? true : undefined), 5_000, 50);
      assert.deepEqual(await raws[i]!.clear({ cmd: "get_token", token }), {});
      assert.equal((await publish(i, token)).error?.name, "AuthenticationError");
    }
    assert.ok(Date.now() - revokedAt < 5_000, "refused everywhere within the live sync's delay");
    assert.equal((await runner(2, token)).error?.name, "TokenAuthenticationError");
  } finally {
    for (const r of raws) r.close();
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
