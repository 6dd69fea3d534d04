/**
 * A minion's REQ transport when libzmq cannot make a socket (EMFILE: its context's sockets all taken — the ones
 * closed after a timeout count until libzmq's reaper has them — or the process's descriptors): the attempt fails
 * as a timeout would and the next one tries again, so a sign-in under a loaded master is retried instead of the
 * minion giving up on a raw error (what made 5,000- and 9,500-minion swarms fail at load 26–30).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as zmq from "zeromq";
import { ZmqReqTransport } from "../../src/lib/zmq-req-client.js";
import { isBrineError } from "../../src/shared/errors.js";
import { freePort } from "../../tools/free-port.js";

/** A context with room for `n` sockets, all taken by idle DEALERs. */
function fullContext(n: number): { ctx: zmq.Context; fillers: zmq.Dealer[] } {
  const ctx = new zmq.Context({ blocky: false });
  ctx.maxSockets = n;
  const fillers: zmq.Dealer[] = [];
  for (;;) {
    try {
      fillers.push(new zmq.Dealer({ context: ctx, linger: 0 }));
    } catch {
      return { ctx, fillers };
    }
  }
}

// both ways a timeout goes (3007.x reopens the socket, 3006.8 waits on it) take their socket the same way
for (const afterTimeout of ["reopen", "wait"] as const) {
  test(`${afterTimeout}: a request whose socket cannot be made yet is tried again at its next attempt and answered`, async () => {
    const port = await freePort();
    const router = new zmq.Router({ linger: 0 });
    await router.bind(`tcp://127.0.0.1:${port}`);
    void (async () => {
      for await (const [id, delim, body] of router) await router.send([id!, delim!, Buffer.concat([Buffer.from("re:"), body!])]);
    })();
    const { ctx, fillers } = fullContext(4);
    assert.ok(fillers.length > 0, "the context is full");
    const t = new ZmqReqTransport({ host: "127.0.0.1", port }, { context: ctx, afterTimeout });
    try {
      const reply = t.request(Buffer.from("hello"), { timeoutMs: 300, tries: 5 });
      // a socket frees up while the first attempt waits out its time
      setTimeout(() => fillers.pop()!.close(), 50);
      assert.equal((await reply).toString(), "re:hello");
    } finally {
      t.close();
      for (const f of fillers) f.close();
      router.close();
    }
  });

  test(`${afterTimeout}: a request that never gets a socket fails as a timed-out request, after its tries, not with libzmq's raw error`, async () => {
    const { ctx, fillers } = fullContext(4);
    const t = new ZmqReqTransport({ host: "127.0.0.1", port: 9 }, { context: ctx, afterTimeout });
    const t0 = performance.now();
    try {
      await assert.rejects(t.request(Buffer.from("x"), { timeoutMs: 100, tries: 3 }), (e: unknown) => {
        assert.ok(isBrineError(e, "MINION_REQ_TIMEOUT"), `a BrineError MINION_REQ_TIMEOUT, not ${String(e)}`);
        assert.match((e as Error).message, /no socket for the request/);
        return true;
      });
      assert.ok(performance.now() - t0 >= 150, "the failed attempts waited their time before the last one");
    } finally {
      t.close();
      for (const f of fillers) f.close();
    }
  });
}
