/**
 * The ZMTP codec (src/shared/protocol/zmtp.ts) against bytes real libzmq peers sent (test/fixtures/zmtp/captures.json,
 * made by tools/zmtp-capture.ts: zeromq.js's libzmq 4.3.5 and pyzmq's libzmq 4.3.4, the one real salt-minions run
 * with here), and against hostile input: every refusal is a `close` event with its reason, never a throw.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { encodeCommand, encodeMessage, frameHeader, greeting, greetingBytes, hwmAllows, oversizedBytesMax, readyCommand, SubscriptionIndex, Subscriptions, ZmtpSession, zmtpLimits, type ZmtpEvent, type ZmtpRole } from "../../src/shared/protocol/zmtp.js";

interface Capture {
  peer: string;
  role: string;
  hex: string;
}
const captures = JSON.parse(readFileSync(new URL("../../../test/fixtures/zmtp/captures.json", import.meta.url), "utf8")) as Record<string, Capture>;
const bytesOf = (name: string) => Buffer.from(captures[name]!.hex, "hex");

/** What a session makes of `input`, fed whole or in pieces of `step` bytes. */
function run(role: ZmtpRole, input: Buffer, step = input.length): ZmtpEvent[] {
  const s = new ZmtpSession(role);
  const out: ZmtpEvent[] = [];
  for (let i = 0; i < input.length; i += Math.max(1, step)) out.push(...s.feed(input.subarray(i, i + Math.max(1, step))));
  return out;
}

/** Events without the bytes to send, in a form assert.deepEqual reads. */
function summary(evs: ZmtpEvent[]): unknown[] {
  return evs.map((e) => {
    switch (e.k) {
      case "send":
        return { send: e.bytes.toString("hex") };
      case "ready":
        return { ready: e.socketType, identity: e.identity.toString(), minor: e.minor };
      case "subscribe":
      case "cancel":
        return { [e.k]: e.topic.toString() };
      case "message":
        return { message: e.frames.map((f) => f.toString()) };
      default:
        return e;
    }
  });
}

/** A peer's greeting and READY, as a libzmq peer of `type` sends them. */
function peerHello(type: string, extra: Buffer[] = []): Buffer {
  return Buffer.concat([greeting(), readyCommand(type), ...extra]);
}

const readyPub = { send: readyCommand("PUB").toString("hex") };
const readyRouter = { send: readyCommand("ROUTER").toString("hex") };

test("brine's greeting and READY are byte for byte what libzmq's PUB and ROUTER send", () => {
  const pub = bytesOf("js-pub-server");
  assert.deepEqual(pub.subarray(0, greetingBytes), greeting());
  assert.deepEqual(pub.subarray(greetingBytes), readyCommand("PUB"));
  const router = bytesOf("js-router-server");
  assert.deepEqual(router.subarray(0, greetingBytes), greeting());
  assert.deepEqual(router.subarray(greetingBytes), readyCommand("ROUTER"));
});

test("captured SUB peers: handshake, then their subscriptions, as 3.1 commands or 3.0 messages, whole or a byte at a time", () => {
  const cases: [string, unknown[]][] = [
    ["js-sub-all", [readyPub, { ready: "SUB", identity: "", minor: 1 }, { subscribe: "" }]],
    ["py-sub-all", [readyPub, { ready: "SUB", identity: "", minor: 1 }, { subscribe: "" }]],
    ["js-sub-topics", [readyPub, { ready: "SUB", identity: "", minor: 1 }, { subscribe: "broadcast" }, { subscribe: "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3" }]],
    // a libzmq SUB talking to a ZMTP 3.0 server sends each subscription as a message starting with 1
    ["js-sub-all-zmtp30", [readyPub, { ready: "SUB", identity: "", minor: 1 }, { subscribe: "" }, { subscribe: "broadcast" }]],
  ];
  for (const [name, want] of cases) {
    assert.ok(captures[name], `capture ${name} is in the fixture`);
    for (const step of [1, 7, 64, 1 << 20]) assert.deepEqual(summary(run("PUB", bytesOf(name), step)), want, `${name} in pieces of ${step}`);
  }
});

test("a peer's READY as brine's tests build it is what libzmq's REQ and DEALER send", () => {
  const req = bytesOf("js-req");
  assert.deepEqual(req.subarray(greetingBytes, greetingBytes + readyCommand("REQ").length), readyCommand("REQ"));
  const dealer = bytesOf("js-dealer");
  const mine = readyCommand("DEALER", Buffer.from("minion-7"));
  assert.deepEqual(dealer.subarray(greetingBytes, greetingBytes + mine.length), mine);
});

test("captured REQ and DEALER peers: the request comes up with its empty delimiter, the DEALER's Identity is read", () => {
  const cases: [string, unknown[]][] = [
    ["js-req", [readyRouter, { ready: "REQ", identity: "", minor: 1 }, { message: ["", "hello"] }]],
    ["py-req", [readyRouter, { ready: "REQ", identity: "", minor: 1 }, { message: ["", "hello"] }]],
    ["js-dealer", [readyRouter, { ready: "DEALER", identity: "minion-7", minor: 1 }, { message: ["", "hello"] }]],
  ];
  for (const [name, want] of cases) {
    for (const step of [1, 5, 1 << 20]) assert.deepEqual(summary(run("ROUTER", bytesOf(name), step)), want, `${name} in pieces of ${step}`);
  }
});

test("a SUB peer's captured bytes sent to a ROUTER are refused at READY (a SUB cannot talk to a ROUTER)", () => {
  const evs = run("ROUTER", bytesOf("js-sub-all"));
  assert.deepEqual(summary(evs), [readyRouter, { k: "close", reason: "a SUB socket cannot talk to a ROUTER socket" }]);
});

/** The reason a session gives for closing on `input`, and what it said before. */
function closeReason(role: ZmtpRole, input: Buffer): string | undefined {
  const evs = run(role, input);
  const closes = evs.filter((e) => e.k === "close");
  assert.ok(closes.length <= 1, "one close at most");
  assert.ok(evs.indexOf(closes[0]!) === -1 || evs.indexOf(closes[0]!) === evs.length - 1, "nothing after a close");
  return closes[0] && (closes[0] as { reason: string }).reason;
}

test("hostile or foreign input closes the connection with a reason, as soon as the byte that shows it arrives", () => {
  const g = greeting();
  const withByte = (i: number, v: number) => {
    const b = Buffer.from(g);
    b[i] = v;
    return b;
  };
  const curve = Buffer.from(g);
  curve.fill(0, 12, 32);
  curve.write("CURVE", 12, "latin1");
  const nullJunk = Buffer.from(g);
  nullJunk[20] = 1;
  const long = (size: bigint, command = false) => {
    const h = Buffer.alloc(9);
    h[0] = 0x02 | (command ? 0x04 : 0);
    h.writeBigUInt64BE(size, 1);
    return h;
  };
  const table: [string, ZmtpRole, Buffer, RegExp][] = [
    ["an HTTP request", "ROUTER", Buffer.from("GET / HTTP/1.1\r\n\r\n"), /not a ZMTP peer/],
    ["a ZMTP 1.0 peer", "ROUTER", Buffer.from([0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x00]), /ZMTP 1\.0/],
    ["a ZMTP 2.0 peer", "PUB", withByte(10, 1).subarray(0, 11), /ZMTP 2\.0/],
    ["the CURVE mechanism", "ROUTER", curve, /CURVE.*not supported/],
    ["NULL padded with junk", "ROUTER", nullJunk, /not supported/],
    ["a PUB peer on a PUB port", "PUB", peerHello("PUB"), /PUB socket cannot talk to a PUB/],
    ["a READY without Socket-Type", "ROUTER", Buffer.concat([g, encodeCommand("READY")]), /untyped/],
    ["malformed READY properties", "ROUTER", Buffer.concat([g, encodeCommand("READY", Buffer.from([11, 0x53]))]), /malformed READY/],
    ["a data frame before READY", "ROUTER", Buffer.concat([g, frameHeader(1, false), Buffer.from("x")]), /before READY/],
    ["a PING before READY", "ROUTER", Buffer.concat([g, encodeCommand("PING", Buffer.from([0, 10]))]), /"PING" before READY/],
    ["an ERROR before READY", "ROUTER", Buffer.concat([g, encodeCommand("ERROR", Buffer.from([3, 0x62, 0x61, 0x64]))]), /peer sent ERROR: bad/],
    ["a command with an empty name", "ROUTER", Buffer.concat([g, frameHeader(1, false, true), Buffer.from([0])]), /malformed command/],
    ["a second READY", "ROUTER", peerHello("REQ", [readyCommand("ROUTER")]), /second READY/],
    ["a request announcing more than oversizedBytesMax (refused from its header)", "ROUTER", peerHello("REQ", [long(BigInt(oversizedBytesMax) + 1n)]), /message of more than/],
    ["a size of 2^64 - 1", "ROUTER", peerHello("REQ", [long(0xffff_ffff_ffff_ffffn)]), /message of more than/],
    ["a command over commandBytesMax", "ROUTER", peerHello("REQ", [long(BigInt(zmtpLimits.ROUTER.commandBytesMax) + 1n, true)]), /command of/],
    ["17 frames in one message", "ROUTER", peerHello("REQ", [Buffer.concat(Array.from({ length: 17 }, (_, i) => Buffer.from([i < 16 ? 1 : 0, 0])))]), /more than 16 frames/],
    ["a malformed PING", "ROUTER", peerHello("REQ", [encodeCommand("PING", Buffer.from([1]))]), /malformed PING/],
    ["a subscription topic over topicBytesMax", "PUB", peerHello("SUB", [encodeCommand("SUBSCRIBE", Buffer.alloc(zmtpLimits.PUB.topicBytesMax + 1, 0x61))]), /topic of/],
    ["a subscription message over the PUB's frame bound", "PUB", peerHello("SUB", [frameHeader(zmtpLimits.PUB.frameBytesMax + 1, false), Buffer.alloc(zmtpLimits.PUB.frameBytesMax + 1, 1)]), /message of more than/],
    ["65 subscriptions", "PUB", peerHello("SUB", Array.from({ length: 65 }, (_, i) => encodeCommand("SUBSCRIBE", Buffer.from(`t${i}`)))), /more than 64 subscriptions/],
  ];
  for (const [what, role, input, reason] of table) {
    const r = closeReason(role, input);
    assert.ok(r !== undefined, `${what}: closed`);
    assert.match(r, reason, what);
  }
});

test("a request over frameBytesMax is read through without being stored, reported with its envelope, and the next one is served", () => {
  const s = new ZmtpSession("ROUTER");
  s.feed(peerHello("REQ"));
  const max = zmtpLimits.ROUTER.frameBytesMax;
  const long = (size: number, more = false) => {
    const h = Buffer.alloc(9);
    h[0] = more ? 0x03 : 0x02;
    h.writeBigUInt64BE(BigInt(size), 1);
    return h;
  };
  const events: ZmtpEvent[] = [];
  events.push(...s.feed(Buffer.concat([frameHeader(0, true), long(max + 1)])));
  const mib = Buffer.alloc(1 << 20);
  let left = max + 1;
  while (left > 0) {
    const n = Math.min(left, mib.length);
    events.push(...s.feed(mib.subarray(0, n)));
    left -= n;
  }
  events.push(...s.feed(encodeMessage([Buffer.alloc(0), Buffer.from("next")])));
  assert.deepEqual(summary(events), [{ k: "oversized", envelope: [Buffer.alloc(0)], bytes: max + 1 }, { message: ["", "next"] }]);
  // frames adding up past the bound: the frames before the crossing one are the envelope, the rest dropped
  const t = new ZmtpSession("ROUTER");
  t.feed(peerHello("DEALER"));
  const evs = t.feed(Buffer.concat([frameHeader(2, true), Buffer.from("ab"), long(max - 1, true), Buffer.alloc(max - 1), frameHeader(1, false), Buffer.from("z")]));
  assert.deepEqual(summary(evs), [{ k: "oversized", envelope: [Buffer.from("ab")], bytes: max + 2 }]);
  assert.equal(t.closed, false);
});

test("a ZMTP 1.0 signature is refused at its tenth byte, an HTTP request at its first", () => {
  const s = new ZmtpSession("ROUTER");
  assert.deepEqual(s.feed(Buffer.from([0xff, 0, 0, 0, 0, 0, 0, 0, 1])), []);
  assert.equal(s.feed(Buffer.from([0x00]))[0]?.k, "close");
  assert.equal(new ZmtpSession("PUB").feed(Buffer.from("G"))[0]?.k, "close");
  // nothing more is read after a close
  const closed = new ZmtpSession("PUB");
  closed.feed(Buffer.from("G"));
  assert.ok(closed.closed);
  assert.deepEqual(closed.feed(greeting()), []);
});

test("PING is answered with PONG and its context; unknown commands and PONG are ignored; CANCEL takes one subscription back", () => {
  const evs = run("PUB", peerHello("SUB", [
    encodeCommand("PING", Buffer.from([0, 50, 0x63, 0x74, 0x78])),
    encodeCommand("PONG", Buffer.from("ctx")),
    encodeCommand("HELLO", Buffer.from("x")),
    encodeCommand("SUBSCRIBE", Buffer.from("a")),
    encodeCommand("SUBSCRIBE", Buffer.from("a")),
    encodeCommand("CANCEL", Buffer.from("a")),
    Buffer.concat([frameHeader(2, false), Buffer.from([0, 0x61])]), // ZMTP 3.0 cancel of "a"
    Buffer.concat([frameHeader(3, false), Buffer.from("abc")]), // not a subscription: dropped, as libzmq's PUB drops it
  ]));
  assert.deepEqual(summary(evs).slice(2), [
    { send: encodeCommand("PONG", Buffer.from("ctx")).toString("hex") },
    { k: "ignored", what: 'unknown command "HELLO"' },
    { subscribe: "a" },
    { subscribe: "a" },
    { cancel: "a" },
    { cancel: "a" },
    { k: "ignored", what: "a message to a PUB socket that is not a subscription" },
  ]);
});

test("a ROUTER passes a multipart message up whole, long frames included, and ignores SUBSCRIBE", () => {
  const big = Buffer.alloc(70_000, 0x41);
  const evs = run("ROUTER", peerHello("DEALER", [encodeCommand("SUBSCRIBE", Buffer.from("x")), encodeMessage([Buffer.alloc(0), Buffer.from("env"), big])]), 4096);
  const msg = evs.find((e) => e.k === "message") as { frames: Buffer[] };
  assert.deepEqual(msg.frames.map((f) => f.length), [0, 3, 70_000]);
  assert.ok(msg.frames[2]!.equals(big));
  assert.ok(evs.some((e) => e.k === "ignored" && /SUBSCRIBE command to a ROUTER/.test(e.what)));
});

test("a request body is a buffer of its own, not a view of the read chunk (worker threads copy a view's whole backing store)", () => {
  const evs = run("ROUTER", peerHello("REQ", [encodeMessage([Buffer.alloc(0), Buffer.from("hello")])]));
  const body = (evs.find((e) => e.k === "message") as { frames: Buffer[] }).frames[1]!;
  assert.equal(body.buffer.byteLength, body.length);
});

test("encoding: short and long frame headers, MORE on all frames but the last", () => {
  assert.deepEqual(frameHeader(0, false), Buffer.from([0, 0]));
  assert.deepEqual(frameHeader(255, true), Buffer.from([1, 255]));
  assert.deepEqual(frameHeader(256, false), Buffer.from([2, 0, 0, 0, 0, 0, 0, 1, 0]));
  assert.deepEqual(frameHeader(5, false, true), Buffer.from([4, 5]));
  assert.deepEqual(encodeMessage([Buffer.from("a"), Buffer.from("bc")]), Buffer.from([1, 1, 0x61, 0, 2, 0x62, 0x63]));
});

test("a message is encoded in one buffer as its frames' headers and bodies back to back, from any frame on (a reply skips its routing id)", () => {
  const frames = [Buffer.from([0, 1, 2, 3, 4]), Buffer.alloc(0), Buffer.alloc(255, 7), Buffer.alloc(70_000, 9)];
  const headerThenBody = (from: number) => Buffer.concat(frames.slice(from).flatMap((f, i, all) => [frameHeader(f.length, i < all.length - 1), f]));
  assert.deepEqual(encodeMessage(frames), headerThenBody(0));
  assert.deepEqual(encodeMessage(frames, 1), headerThenBody(1));
  assert.deepEqual(encodeMessage(frames, 3).subarray(0, 9), Buffer.from([2, 0, 0, 0, 0, 0, 1, 0x11, 0x70]), "a long frame: 8-byte size, no MORE on the last");
  assert.equal(encodeMessage(frames, 4).length, 0);
});

test("subscriptions match as prefixes of the first frame and are counted per topic", () => {
  const s = new Subscriptions();
  assert.equal(s.wants(Buffer.from("x")), false);
  s.add(Buffer.from("broad"));
  assert.equal(s.wants(Buffer.from("broadcast")), true);
  assert.equal(s.wants(Buffer.from("bro")), false);
  s.add(Buffer.from("broad"));
  s.remove(Buffer.from("broad"));
  assert.equal(s.wants(Buffer.from("broadcast")), true, "one of two subscriptions is left");
  s.remove(Buffer.from("broad"));
  assert.equal(s.wants(Buffer.from("broadcast")), false);
  s.add(Buffer.alloc(0));
  assert.equal(s.wants(Buffer.alloc(0)), true, "the empty subscription takes everything");
  assert.equal(s.size, 1);
  s.remove(Buffer.from("never"));
  assert.equal(s.size, 1);
});

test("the subscription index finds the same peers as asking every peer's subscriptions, each once", () => {
  // Salt's topics: "" (no zmq_filtering), "broadcast", "syndic", a minion id's sha1; and prefixes of them
  const topics = ["", "broadcast", "broad", "syndic", "a".repeat(40), "b".repeat(40), "a".repeat(20)].map((t) => Buffer.from(t));
  const firsts = ["broadcast", "syndic", "a".repeat(40), "b".repeat(40) + "tail", "a".repeat(19), "", "zzz"].map((t) => Buffer.from(t));
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.nat(9), fc.nat(topics.length - 1), fc.boolean()), { maxLength: 80 }), (ops) => {
      const index = new SubscriptionIndex<number>();
      const peers = Array.from({ length: 10 }, () => new Subscriptions());
      for (const [peer, t, on] of ops) {
        const topic = topics[t]!;
        // as the shell does: add on every subscribe, remove when the session holds the topic no more
        if (on) (peers[peer]!.add(topic), index.add(peer, topic));
        else {
          peers[peer]!.remove(topic);
          if (!peers[peer]!.has(topic)) index.remove(peer, topic);
        }
      }
      for (const first of firsts) {
        const want = peers.flatMap((s, i) => (s.wants(first) ? [i] : []));
        assert.deepEqual([...index.match(first)].sort((a, b) => a - b), want, `first frame ${JSON.stringify(first.toString())}`);
      }
    }),
    { numRuns: 300 },
  );
});

test("a peer that leaves the index with all its topics is matched by nothing", () => {
  const index = new SubscriptionIndex<string>();
  const s = new Subscriptions();
  for (const t of ["", "broadcast", "x".repeat(40)]) (s.add(Buffer.from(t)), index.add("p", Buffer.from(t)));
  index.add("q", Buffer.from("broadcast"));
  assert.deepEqual(index.match(Buffer.from("broadcast")).sort(), ["p", "q"], "p is matched twice over and given once");
  for (const t of s.distinct()) index.remove("p", t);
  assert.deepEqual(index.match(Buffer.from("broadcast")), ["q"]);
  assert.deepEqual(index.match(Buffer.from("x".repeat(40))), []);
});

test("pub_hwm: a subscriber with hwm messages waiting gets no more; 0 is no bound", () => {
  const table: [number, number, boolean][] = [
    [0, 1000, true],
    [999, 1000, true],
    [1000, 1000, false],
    [5000, 1000, false],
    [1_000_000, 0, true],
  ];
  for (const [queued, hwm, ok] of table) assert.equal(hwmAllows(queued, hwm), ok, `${queued} waiting, hwm ${hwm}`);
});

test("fuzz: any bytes after a valid handshake give events or a close, never a throw", () => {
  for (const role of ["PUB", "ROUTER"] as const) {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 8 }), (chunks) => {
        const s = new ZmtpSession(role);
        s.feed(peerHello(role === "PUB" ? "SUB" : "DEALER"));
        for (const c of chunks) {
          const evs = s.feed(c);
          if (evs.some((e) => e.k === "close")) assert.ok(s.closed);
        }
      }),
      { numRuns: 500 },
    );
  }
});
