/** A test master serving the HTTP API, with eauth users for the API tests. */
import { startTestMaster, freePort, type TestMaster } from "./master.js";

export const API_SECRET = "an-api-test-shared-secret";

/** A master with the API on a free port, `alice` allowed everything, `bob` only test.ping. */
export async function startApiMaster(extra: Record<string, unknown> = {}): Promise<{ tm: TestMaster; base: string; port: number }> {
  const port = await freePort();
  const tm = await startTestMaster({
    auto_accept: true,
    rest_cherrypy: { port, host: "127.0.0.1", disable_ssl: true },
    netapi_enable_clients: ["local", "local_async", "runner", "runner_async", "wheel"],
    sharedsecret: API_SECRET,
    token_expire_user_override: true,
    external_auth: { sharedsecret: { alice: [".*", "@runner", "@wheel", "@jobs"], bob: ["test.ping"] } },
    ...extra,
  } as never);
  return { tm, base: `http://127.0.0.1:${port}`, port };
}
