/**
 * brine's own ZMTP server (src/main-thread/zmtp-server.ts) with real libzmq peers (zeromq.js) and forged raw TCP
 * peers: publishes reach the subscribers their subscriptions match, replies reach the peer that asked, a REQ
 * peer has one request in flight, `pub_hwm` drops for a subscriber that stopped reading (counted) and not for
 * one that reads, and bad peers are closed without disturbing the others.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import * as zmq from "zeromq";
import { NativePublisher, NativeRouter, parseTcpEndpoint } from "../../src/main-thread/zmtp-server.js";
import { encodeCommand, encodeMessage, greeting, readyCommand } from "../../src/shared/protocol/zmtp.js";
import { freePort } from "../../tools/free-port.js";
import { isBrineError } from "../../src/shared/errors.js";

const until = async (cond: () => boolean, ms = 5_000, what = "condition") => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

/** A raw TCP peer: connects, sends `hello`, records what it gets and whether the server closed it. */
function rawPeer(port: number, hello: Buffer[], opts: { read?: boolean } = {}) {
  const sock = net.connect(port, "127.0.0.1");
  const got: Buffer[] = [];
  const st = { closed: false, bytes: () => Buffer.concat(got), sock };
  sock.on("connect", () => {
    for (const b of hello) sock.write(b);
  });
  if (opts.read === false) sock.pause();
  else sock.on("data", (d) => got.push(d));
  sock.on("close", () => (st.closed = true));
  sock.on("error", () => {});
  return st;
}

test("tcp endpoints are parsed as the master writes them", () => {
  assert.deepEqual(parseTcpEndpoint("tcp://127.0.0.1:4505"), { host: "127.0.0.1", port: 4505 });
  assert.deepEqual(parseTcpEndpoint("tcp://[::]:4506"), { host: "::", port: 4506 });
  assert.deepEqual(parseTcpEndpoint("tcp://*:1"), { host: undefined, port: 1 });
  assert.throws(() => parseTcpEndpoint("ipc:///tmp/x"), /not a tcp endpoint/);
});

test("ipv6 as Salt's option means it: an IPv6 interface is refused without it, saying why, and served with it", async () => {
  const port = await freePort();
  const refused = new NativePublisher({ backlog: 10, ipv6: false }, 1000);
  await assert.rejects(refused.bind(`tcp://[::1]:${port}`), (e) => isBrineError(e, "TRANSPORT_BAD_ENDPOINT") && /::1 is an IPv6 address and ipv6 is False/.test(e.message));
  refused.close();
  const pub = new NativePublisher({ backlog: 10, ipv6: true }, 1000);
  await pub.bind(`tcp://[::1]:${port}`);
  const sub = new zmq.Subscriber({ linger: 0, ipv6: true });
  try {
    sub.subscribe();
    sub.connect(`tcp://[::1]:${port}`);
    await until(() => pub.subscribers === 1, 5_000, "the IPv6 subscriber");
    // past its handshake is not yet subscribed (SUBSCRIBE follows READY): publish until it has one, never wait
    // on a receive that a publish made before the subscription would leave waiting for ever
    let got: string | undefined;
    void sub.receive().then(([m]) => (got = m!.toString()), () => {});
    await until(() => {
      if (got === undefined) pub.push([Buffer.from("over ipv6")]);
      return got !== undefined;
    }, 5_000, "a publish over IPv6");
    assert.equal(got, "over ipv6");
  } finally {
    sub.close();
    pub.close();
  }
});

test("publishes reach libzmq SUB sockets whose subscriptions match their first frame, multipart kept", async () => {
  const port = await freePort();
  const pub = new NativePublisher({ backlog: 100 }, 1000);
  await pub.bind(`tcp://127.0.0.1:${port}`);
  const all = new zmq.Subscriber({ linger: 0 });
  all.subscribe("");
  const topical = new zmq.Subscriber({ linger: 0 });
  topical.subscribe("broadcast");
  all.connect(`tcp://127.0.0.1:${port}`);
  topical.connect(`tcp://127.0.0.1:${port}`);
  try {
    await until(() => pub.subscribers === 2, 5_000, "two subscribers");
    // subscriptions follow READY: publish a marker until both have it
    const gotAll: string[] = [];
    const gotTopical: string[] = [];
    void (async () => {
      for await (const m of all) gotAll.push(m.map(String).join("|"));
    })().catch(() => {});
    void (async () => {
      for await (const m of topical) gotTopical.push(m.map(String).join("|"));
    })().catch(() => {});
    await until(() => {
      pub.push([Buffer.from("broadcast-sync")]);
      return gotAll.includes("broadcast-sync") && gotTopical.includes("broadcast-sync");
    }, 5_000, "subscriptions");
    await new Promise((r) => setTimeout(r, 200)); // the last markers pushed arrive
    gotAll.length = 0;
    gotTopical.length = 0;
    pub.push([Buffer.from("other")]);
    pub.push([Buffer.from("broadcast"), Buffer.from("payload")]);
    pub.push([Buffer.from("last")]);
    await until(() => gotAll.length === 3, 5_000, "three messages to the '' subscriber");
    await until(() => gotTopical.length === 1, 5_000, "one message to the 'broadcast' subscriber");
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(gotAll, ["other", "broadcast|payload", "last"]);
    assert.deepEqual(gotTopical, ["broadcast|payload"]);
    assert.deepEqual(pub.remoteAddresses().sort(), ["127.0.0.1", "127.0.0.1"]);
  } finally {
    all.close();
    topical.close();
    pub.close();
  }
});

test("requests from libzmq REQ and DEALER sockets are answered to the peer that asked, in any order", async () => {
  const port = await freePort();
  const held: Buffer[][] = [];
  const router = new NativeRouter({ backlog: 100 }, (frames) => held.push(frames));
  await router.bind(`tcp://127.0.0.1:${port}`);
  const a = new zmq.Request({ linger: 0, receiveTimeout: 5_000 });
  const b = new zmq.Request({ linger: 0, receiveTimeout: 5_000 });
  a.connect(`tcp://127.0.0.1:${port}`);
  b.connect(`tcp://127.0.0.1:${port}`);
  try {
    await a.send("from-a");
    await b.send("from-b");
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(held.length, 0, "nothing is handed up before start()");
    router.start();
    await until(() => held.length === 2, 5_000, "two requests");
    for (const f of held) assert.deepEqual([f[0]!.length, f[1]!.length], [5, 0], "routing id and the REQ's empty delimiter");
    // made for each request from the peer's id, a slice of Node's shared pool: no ArrayBuffer kept per connection (issue 17)
    for (const f of held) assert.ok(f[0]!.buffer.byteLength > 5, "the routing id frame is a slice of a shared pool");
    assert.notDeepEqual(held[0]![0], held[1]![0], "two peers, two routing ids");
    // answer b first, then a
    for (const f of [...held].reverse()) router.push([...f.slice(0, -1), Buffer.from(`re:${f[f.length - 1]!.toString()}`)]);
    assert.equal((await a.receive())[0]!.toString(), "re:from-a");
    assert.equal((await b.receive())[0]!.toString(), "re:from-b");

    // a DEALER may pipeline: all its requests come up, the replies come back in the order sent
    held.length = 0;
    const d = new zmq.Dealer({ linger: 0, receiveTimeout: 5_000 });
    d.connect(`tcp://127.0.0.1:${port}`);
    for (let i = 0; i < 5; i++) await d.send(["", `n${i}`]);
    await until(() => held.length === 5, 5_000, "five pipelined requests");
    assert.ok(held.every((f) => f[0]!.equals(held[0]![0]!)), "one peer: the same routing id on each request");
    for (const f of held) router.push([...f.slice(0, -1), Buffer.from(`re:${f[f.length - 1]!.toString()}`)]);
    for (let i = 0; i < 5; i++) assert.deepEqual((await d.receive()).map(String), ["", `re:n${i}`]);
    d.close();
    assert.equal(router.sent, 7);
  } finally {
    a.close();
    b.close();
    router.close();
  }
});

test("a REQ peer has one request in flight: a forged second request waits for the first one's reply", async () => {
  const port = await freePort();
  const held: Buffer[][] = [];
  const router = new NativeRouter({ backlog: 100 }, (frames) => held.push(frames));
  await router.bind(`tcp://127.0.0.1:${port}`);
  router.start();
  const req = (body: string) => encodeMessage([Buffer.alloc(0), Buffer.from(body)]);
  const p = rawPeer(port, [greeting(), readyCommand("REQ"), req("one"), req("two")]);
  try {
    await until(() => held.length === 1, 5_000, "the first request");
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(held.length, 1, "the second waits");
    router.push([...held[0]!.slice(0, -1), Buffer.from("r1")]);
    await until(() => held.length === 2, 5_000, "the second request after the first reply");
    assert.equal(held[1]![2]!.toString(), "two");
  } finally {
    p.sock.destroy();
    router.close();
  }
});

test("bad peers are closed and counted (a silent one as a handshake timeout); a good peer is served meanwhile; a reply to a gone peer is dropped and counted", async () => {
  const port = await freePort();
  const router = new NativeRouter({ backlog: 100, handshakeMs: 200 }, (frames) => router.push([...frames.slice(0, -1), Buffer.from("ok")]));
  await router.bind(`tcp://127.0.0.1:${port}`);
  router.start();
  const http = rawPeer(port, [Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n")]);
  const silent = rawPeer(port, []);
  const sub = rawPeer(port, [greeting(), readyCommand("SUB")]);
  const good = new zmq.Request({ linger: 0, receiveTimeout: 5_000 });
  good.connect(`tcp://127.0.0.1:${port}`);
  try {
    await until(() => http.closed && sub.closed, 5_000, "the HTTP and SUB peers closed");
    await good.send("hi");
    assert.equal((await good.receive())[0]!.toString(), "ok");
    await until(() => silent.closed, 5_000, "the silent peer closed after its handshake time");
    assert.equal(router.refused, 3);
    assert.equal(router.handshakeTimeouts, 1, "only the silent peer ran out of handshake time (the HTTP and SUB peers were refused for what they sent)");
    assert.equal(http.bytes().subarray(0, 10).toString("hex"), greeting().subarray(0, 10).toString("hex"), "it got our greeting, nothing more");
    router.push([Buffer.from([0, 1, 2, 3, 4]), Buffer.alloc(0), Buffer.from("nobody")]);
    assert.equal(router.dropped, 1);
  } finally {
    good.close();
    router.close();
  }
});

test("pub_hwm: a subscriber that stopped reading loses messages past the mark (counted); one that reads gets them all", async () => {
  const port = await freePort();
  const hwm = 20;
  const pub = new NativePublisher({ backlog: 100 }, hwm);
  await pub.bind(`tcp://127.0.0.1:${port}`);
  const stuck = rawPeer(port, [greeting(), readyCommand("SUB"), encodeCommand("SUBSCRIBE")], { read: false });
  const reader = new zmq.Subscriber({ linger: 0, receiveHighWaterMark: 0 });
  reader.subscribe("");
  reader.connect(`tcp://127.0.0.1:${port}`);
  let got = 0;
  void (async () => {
    for await (const _ of reader) got++;
  })().catch(() => {});
  try {
    await until(() => pub.subscribers === 2, 5_000, "two subscribers");
    await until(() => {
      pub.push([Buffer.from("sync")]);
      return got > 0;
    }, 5_000, "the reader's subscription");
    await new Promise((r) => setTimeout(r, 200)); // the last markers pushed arrive
    const before = got;
    const payload = Buffer.alloc(64 * 1024, 7);
    const total = 400;
    // in rounds, letting the reader drain between them
    for (let i = 0; i < total; i += 10) {
      for (let j = 0; j < 10; j++) pub.push([payload]);
      const want = before + i + 10;
      await until(() => got >= want, 10_000, `the reader at ${want}`);
    }
    assert.equal(got - before, total, "the reading subscriber got every message");
    assert.ok(pub.dropped > 0, `the stuck subscriber lost messages (dropped ${pub.dropped})`);
    assert.ok(pub.dropped <= total - hwm, "at most what did not fit under its mark");
    assert.ok(pub.length <= hwm, `at most hwm messages wait (${pub.length})`);
    assert.equal(stuck.closed, false, "a slow subscriber is not disconnected (as libzmq's PUB)");
  } finally {
    reader.close();
    stuck.sock.destroy();
    pub.close();
  }
});

test("a publish to more subscribers than one turn's slice reaches all of them, publishes in order, and drained() waits for the last write", async () => {
  const port = await freePort();
  const pub = new NativePublisher({ backlog: 100 }, 0, 2);
  await pub.bind(`tcp://127.0.0.1:${port}`);
  const peers = Array.from({ length: 5 }, () => rawPeer(port, [greeting(), readyCommand("SUB"), encodeCommand("SUBSCRIBE")]));
  try {
    await until(() => pub.subscribers === 5, 5_000, "five subscribers");
    await new Promise((r) => setTimeout(r, 100)); // their subscriptions
    const n = 20;
    for (let i = 0; i < n; i++) pub.push([Buffer.from(`m${String(i).padStart(2, "0")}`)]);
    assert.ok(pub.length > 0, "some publishes wait for their next slice");
    await pub.drained();
    assert.equal(pub.length, 0);
    // what each peer got after our greeting and READY: the 20 messages in order
    const want = Buffer.concat(Array.from({ length: n }, (_, i) => encodeMessage([Buffer.from(`m${String(i).padStart(2, "0")}`)])));
    const head = greeting().length + readyCommand("PUB").length;
    await until(() => peers.every((p) => p.bytes().length >= head + want.length), 5_000, "every peer's 20 messages");
    for (const p of peers) assert.deepEqual(p.bytes().subarray(head), want);
  } finally {
    for (const p of peers) p.sock.destroy();
    pub.close();
  }
});

test("a watcher is told of each subscriber past its handshake and of its leaving at once, not a poll later", async () => {
  const port = await freePort();
  const pub = new NativePublisher({ backlog: 10 }, 1000);
  await pub.bind(`tcp://127.0.0.1:${port}`);
  const first = new zmq.Subscriber({ linger: 0 });
  const events: string[] = [];
  try {
    first.subscribe();
    first.connect(`tcp://127.0.0.1:${port}`);
    await until(() => pub.subscribers === 1, 5_000, "the first subscriber");
    // a watcher set later is told of the subscribers already there
    pub.watch({ connected: (a) => events.push(`+${a}`), disconnected: (a) => events.push(`-${a}`) });
    assert.deepEqual(events, ["+127.0.0.1"]);
    const second = new zmq.Subscriber({ linger: 0 });
    second.subscribe();
    second.connect(`tcp://127.0.0.1:${port}`);
    await until(() => events.length === 2, 5_000, "the second subscriber told");
    second.close();
    const closedAt = Date.now();
    await until(() => events.length === 3, 5_000, "the second subscriber's leaving told");
    assert.ok(Date.now() - closedAt < 900, "told as the connection closed, within less than the old 1 s poll");
    assert.deepEqual(events, ["+127.0.0.1", "+127.0.0.1", "-127.0.0.1"]);
  } finally {
    first.close();
    pub.close();
  }
});

test("the accepted sockets of a port share their listeners: no closure is made per connection", async () => {
  class Router extends NativeRouter {
    sockets(): net.Socket[] {
      return [...this.conns.keys()];
    }
  }
  class Publisher extends NativePublisher {
    sockets(): net.Socket[] {
      return [...this.conns.keys()];
    }
  }
  const rport = await freePort();
  const pport = await freePort();
  const router = new Router({ backlog: 10 }, (frames) => router.push([frames[0]!, Buffer.alloc(0), Buffer.from("ok")]));
  const pub = new Publisher({ backlog: 10 }, 1000);
  await router.bind(`tcp://127.0.0.1:${rport}`);
  await pub.bind(`tcp://127.0.0.1:${pport}`);
  router.start();
  const req = (i: number) => rawPeer(rport, [greeting(), readyCommand("REQ"), encodeMessage([Buffer.alloc(0), Buffer.from(`q${i}`)])]);
  const sub = () => rawPeer(pport, [greeting(), readyCommand("SUB"), encodeCommand("SUBSCRIBE", Buffer.alloc(0))]);
  const peers = [req(1), req(2), sub(), sub()];
  try {
    await until(() => router.sent === 2 && pub.subscribers === 2, 5_000, "two answered requests and two subscribers");
    for (const server of [router, pub]) {
      const [a, b] = server.sockets();
      assert.ok(a && b, "two connections");
      for (const ev of ["data", "error", "close", "drain"]) {
        const la = a.listeners(ev);
        assert.equal(la.length, 1, `one ${ev} listener`);
        assert.equal(la[0], b.listeners(ev)[0], `the same ${ev} listener on both connections of the ${server.role}`);
      }
    }
    for (const p of peers) p.sock.destroy();
    await until(() => router.sockets().length === 0 && pub.sockets().length === 0 && pub.subscribers === 0, 5_000, "the connections forgotten once closed");
  } finally {
    for (const p of peers) p.sock.destroy();
    router.close();
    pub.close();
  }
});
