/**
 * ZMTP 3.x, the server side of the two sockets minions connect to, as a pure core (no I/O: bytes in, events
 * out; the shell is src/main-thread/zmtp-server.ts). Written from the specifications, ZMTP 3.0
 * (rfc.zeromq.org/spec/23) and 3.1 (spec/37), and from what libzmq peers send (golden captures in
 * test/fixtures/zmtp/): brine's `brine_minion_transport: native`.
 *
 * What a connection goes through:
 * - the greeting, 64 bytes each way: signature (0xFF, 8 bytes of padding, 0x7F), version 3.1, mechanism
 *   `NULL`, as-server 0, filler. A peer whose signature is not ZMTP 3.x (ZMTP 1.0/2.0, libzmq before 4.0; an
 *   HTTP client; noise) or whose mechanism is not NULL (PLAIN, CURVE: Salt uses neither) is closed, the reason
 *   said, as soon as the byte that shows it has arrived;
 * - the NULL handshake: each side sends READY with its Socket-Type (ROUTER also an empty Identity, as libzmq
 *   does); the peer's type must be one this role talks to (PUB: SUB, XSUB; ROUTER: REQ, DEALER, ROUTER), an
 *   ERROR command closes, a data frame before READY closes;
 * - then frames: flags (MORE, LONG, COMMAND), size (1 or 8 bytes, big-endian), body. Commands: PING is
 *   answered with PONG and its context (3.1), PONG ignored, SUBSCRIBE / CANCEL (3.1) change a PUB peer's
 *   subscriptions, any other command is ignored (reported). Data messages: to a PUB, a one-frame message
 *   starting with 1 or 0 is a subscription or its cancel (ZMTP 3.0, what a libzmq before 4.3.3 or a 3.0 peer
 *   sends), anything else is dropped as libzmq's PUB drops it; to a ROUTER, the message (the REQ envelope's
 *   empty delimiter included) goes up whole.
 *
 * Every size a peer chooses is bounded before it is allocated (`ZmtpLimits`): a request over `frameBytesMax` is
 * read through without being stored and reported `oversized` (the master answers it "bad load", as it answers
 * any request over that bound); a PUB peer's message over its bound, too many frames in one message, a command
 * body too large, too many subscriptions or a topic too long closes the connection with a reason; the session
 * never throws on input.
 */
import { frameBytesMax } from "./limits.js";

/** The two server roles brine plays. */
export type ZmtpRole = "PUB" | "ROUTER";

/** Peer socket types each role talks to (ZMTP 3.0, "Socket compatibility"). */
const ACCEPTS: Record<ZmtpRole, readonly string[]> = { PUB: ["SUB", "XSUB"], ROUTER: ["REQ", "DEALER", "ROUTER"] };

export const greetingBytes = 64;
const signatureBytes = 10;
const mechanismOffset = 12;
const mechanismBytes = 20;
const FLAG_MORE = 0x01;
const FLAG_LONG = 0x02;
const FLAG_COMMAND = 0x04;

export interface ZmtpLimits {
  /** largest data message a peer may send (all its frames), bytes */
  frameBytesMax: number;
  /** most frames in one message (a REQ's delimiter and body are two) */
  messageFramesMax: number;
  /** largest command body a peer may send (READY's properties, PING's context, a SUBSCRIBE's topic), bytes */
  commandBytesMax: number;
  /** most subscriptions one peer of a PUB may hold */
  subscriptionsMax: number;
  /** longest subscription topic, bytes (Salt's are "", "broadcast", "syndic" or a 40-character sha1) */
  topicBytesMax: number;
}

/** Longest subscription topic, bytes. */
export const topicBytesMax = 1024;
/**
 * Largest request message a ROUTER reads through (dropping its bytes) to answer it "bad load", bytes; a peer that
 * announces more is closed.
 */
export const oversizedBytesMax = 1024 * 1024 * 1024;

/** The bounds of each role: a ROUTER takes brine's request frames; a PUB only subscriptions. */
export const zmtpLimits: Record<ZmtpRole, ZmtpLimits> = {
  ROUTER: { frameBytesMax, messageFramesMax: 16, commandBytesMax: 4096, subscriptionsMax: 0, topicBytesMax: 0 },
  PUB: { frameBytesMax: topicBytesMax + 1, messageFramesMax: 4, commandBytesMax: topicBytesMax + 16, subscriptionsMax: 64, topicBytesMax },
};

export type ZmtpEvent =
  /** bytes to write to the peer, in order */
  | { k: "send"; bytes: Buffer }
  /** the handshake is done: the peer's socket type, its Identity property (empty if none), its ZMTP minor version */
  | { k: "ready"; socketType: string; identity: Buffer; minor: number }
  | { k: "subscribe"; topic: Buffer }
  | { k: "cancel"; topic: Buffer }
  /** a whole data message (ROUTER) */
  | { k: "message"; frames: Buffer[] }
  /**
   * a ROUTER's message over `frameBytesMax` (all its frames): its bytes past the bound were read and dropped, never
   * stored; `envelope` is the frames before the one that crossed it, to answer it by (as brine answers any
   * request over the bound: "bad load")
   */
  | { k: "oversized"; envelope: Buffer[]; bytes: number }
  /** input dropped as the spec or libzmq drops it (an unknown command, a PUB peer's non-subscription message) */
  | { k: "ignored"; what: string }
  /** the connection must be closed; nothing more is read */
  | { k: "close"; reason: string };

/** The greeting brine sends: ZMTP 3.1, NULL, as-server 0 (libzmq's bytes for a NULL socket). */
export function greeting(): Buffer {
  const g = Buffer.alloc(greetingBytes);
  g[0] = 0xff;
  // padding: libzmq puts 1 in its last byte (a ZMTP 1.0 peer reads it as an empty identity's length); any value is valid
  g[signatureBytes - 2] = 0x01;
  g[signatureBytes - 1] = 0x7f;
  g[10] = 3;
  g[11] = 1;
  g.write("NULL", mechanismOffset, "latin1");
  return g;
}

/** A frame's header: flags and size. */
export function frameHeader(size: number, more: boolean, command = false): Buffer {
  const flags = (more ? FLAG_MORE : 0) | (command ? FLAG_COMMAND : 0);
  if (size <= 255) return Buffer.from([flags, size]);
  const h = Buffer.allocUnsafe(9);
  h[0] = flags | FLAG_LONG;
  h.writeBigUInt64BE(BigInt(size), 1);
  return h;
}

/**
 * One buffer holding a whole message (headers and bodies) of `frames` from index `from` on: what a publish writes
 * to every subscriber, and a reply to its peer (one write, one syscall). Written in place: one allocation.
 */
export function encodeMessage(frames: readonly Uint8Array[], from = 0): Buffer {
  let bytes = 0;
  for (let i = from; i < frames.length; i++) bytes += (frames[i]!.length <= 255 ? 2 : 9) + frames[i]!.length;
  const out = Buffer.allocUnsafe(bytes);
  let pos = 0;
  for (let i = from; i < frames.length; i++) {
    const f = frames[i]!;
    const flags = i < frames.length - 1 ? FLAG_MORE : 0;
    if (f.length <= 255) {
      out[pos++] = flags;
      out[pos++] = f.length;
    } else {
      out[pos++] = flags | FLAG_LONG;
      out.writeUInt32BE(Math.floor(f.length / 0x1_0000_0000), pos);
      out.writeUInt32BE(f.length >>> 0, pos + 4);
      pos += 8;
    }
    out.set(f, pos);
    pos += f.length;
  }
  return out;
}

/** A command frame: name, then data. */
export function encodeCommand(name: string, data: Uint8Array = Buffer.alloc(0)): Buffer {
  const body = Buffer.concat([Buffer.from([name.length]), Buffer.from(name, "latin1"), data]);
  return Buffer.concat([frameHeader(body.length, false, true), body]);
}

/**
 * READY with its metadata properties (name length, name, value length as 4 bytes, value): Socket-Type, and for
 * the socket types that carry one an Identity (empty unless given), as libzmq sends it. brine sends it as a PUB
 * or ROUTER; tests and tools speak as any peer type.
 */
export function readyCommand(socketType: string, identity: Buffer = Buffer.alloc(0)): Buffer {
  const props: Buffer[] = [];
  const prop = (name: string, value: Buffer) => {
    const len = Buffer.allocUnsafe(4);
    len.writeUInt32BE(value.length);
    props.push(Buffer.from([name.length]), Buffer.from(name, "latin1"), len, value);
  };
  prop("Socket-Type", Buffer.from(socketType, "latin1"));
  if (socketType === "REQ" || socketType === "DEALER" || socketType === "ROUTER") prop("Identity", identity);
  return encodeCommand("READY", Buffer.concat(props));
}

/** Reads a READY's properties; undefined when they do not parse. Names are case-insensitive (spec 23). */
export function readProperties(data: Buffer): Map<string, Buffer> | undefined {
  const out = new Map<string, Buffer>();
  let i = 0;
  while (i < data.length) {
    const nameLen = data[i]!;
    if (nameLen === 0 || i + 1 + nameLen + 4 > data.length) return undefined;
    const name = data.toString("latin1", i + 1, i + 1 + nameLen).toLowerCase();
    i += 1 + nameLen;
    const valueLen = data.readUInt32BE(i);
    i += 4;
    if (i + valueLen > data.length) return undefined;
    out.set(name, data.subarray(i, i + valueLen));
    i += valueLen;
  }
  return out;
}

/**
 * A peer's subscriptions, counted as libzmq counts them (subscribing twice to a topic takes two cancels), and
 * matched as prefixes of a message's first frame. Every connection's session has one, so it holds nothing until a
 * topic comes: a ROUTER's peers and Salt's minions without zmq_filtering (a subscription to "", a counter) never
 * make its map (an empty Map and its table are ~180 B, two connections per minion: issue 17). A topic is kept once,
 * as its latin1 string (no Buffer, which would be a slice of Buffer's shared pool kept alive per minion).
 */
export class Subscriptions {
  /** topic (latin1) → subscriptions to it; made at the first topic, dropped with the last */
  private topics: Map<string, number> | undefined;
  /** a subscription to "" (everything): Salt's minions without zmq_filtering */
  private all = 0;

  get size(): number {
    return (this.topics?.size ?? 0) + (this.all > 0 ? 1 : 0);
  }

  add(topic: Buffer): void {
    if (topic.length === 0) {
      this.all++;
      return;
    }
    const key = topic.toString("latin1");
    this.topics ??= new Map();
    this.topics.set(key, (this.topics.get(key) ?? 0) + 1);
  }

  remove(topic: Buffer): void {
    if (topic.length === 0) {
      this.all = Math.max(0, this.all - 1);
      return;
    }
    const key = topic.toString("latin1");
    const n = this.topics?.get(key);
    if (n === undefined) return;
    if (n > 1) this.topics!.set(key, n - 1);
    else {
      this.topics!.delete(key);
      if (this.topics!.size === 0) this.topics = undefined;
    }
  }

  has(topic: Buffer): boolean {
    return topic.length === 0 ? this.all > 0 : this.topics?.has(topic.toString("latin1")) === true;
  }

  /** The peer's distinct topics ("" for a subscription to everything). */
  *distinct(): IterableIterator<Buffer> {
    if (this.all > 0) yield Buffer.alloc(0);
    if (this.topics) for (const key of this.topics.keys()) yield Buffer.from(key, "latin1");
  }

  /** Whether a message whose first frame is `first` goes to this peer. */
  wants(first: Uint8Array): boolean {
    if (this.all > 0) return true;
    if (!this.topics) return false;
    for (const key of this.topics.keys()) if (isPrefix(key, first)) return true;
    return false;
  }
}

/** Whether the latin1 string `key` is a prefix of `bytes`. */
function isPrefix(key: string, bytes: Uint8Array): boolean {
  if (key.length > bytes.length) return false;
  for (let i = 0; i < key.length; i++) if (key.charCodeAt(i) !== bytes[i]) return false;
  return true;
}

/**
 * Which peers of a PUB a message goes to, by their subscriptions, without looking at every peer: the peers
 * subscribed to everything, and for each topic length in use the peers subscribed to the message's first frame's
 * prefix of that length (a map lookup). Salt's topics have a handful of lengths ("" without `zmq_filtering`;
 * "broadcast", "syndic" and 40-character sha1 hashes with it), so a match costs a few lookups, not a scan of
 * every subscription. A peer is in the index once per distinct topic (its counts are the session's).
 */
export class SubscriptionIndex<T> {
  /** peers subscribed to "" */
  private readonly all = new Set<T>();
  /** topic length → topic (latin1) → peers */
  private readonly byLength = new Map<number, Map<string, Set<T>>>();

  /** The peer holds `topic` (idempotent). */
  add(peer: T, topic: Uint8Array): void {
    if (topic.length === 0) {
      this.all.add(peer);
      return;
    }
    let byTopic = this.byLength.get(topic.length);
    if (!byTopic) this.byLength.set(topic.length, (byTopic = new Map()));
    const key = Buffer.from(topic.buffer, topic.byteOffset, topic.length).toString("latin1");
    let peers = byTopic.get(key);
    if (!peers) byTopic.set(key, (peers = new Set()));
    peers.add(peer);
  }

  /** The peer no longer holds `topic` (idempotent). */
  remove(peer: T, topic: Uint8Array): void {
    if (topic.length === 0) {
      this.all.delete(peer);
      return;
    }
    const byTopic = this.byLength.get(topic.length);
    const key = Buffer.from(topic.buffer, topic.byteOffset, topic.length).toString("latin1");
    const peers = byTopic?.get(key);
    if (!peers) return;
    peers.delete(peer);
    if (peers.size === 0) byTopic!.delete(key);
    if (byTopic!.size === 0) this.byLength.delete(topic.length);
  }

  /** The peers a message whose first frame is `first` goes to, each once, in a new array. */
  match(first: Uint8Array): T[] {
    const sets: Set<T>[] = [];
    if (this.all.size) sets.push(this.all);
    if (this.byLength.size) {
      const head = Buffer.from(first.buffer, first.byteOffset, first.length);
      for (const [len, byTopic] of this.byLength) {
        if (len > head.length) continue;
        const peers = byTopic.get(head.toString("latin1", 0, len));
        if (peers) sets.push(peers);
      }
    }
    if (sets.length === 0) return [];
    if (sets.length === 1) return [...sets[0]!];
    const seen = new Set<T>();
    for (const set of sets) for (const p of set) seen.add(p);
    return [...seen];
  }
}

/**
 * Whether one more message may be queued for a subscriber that has `queued` messages waiting to be written:
 * `pub_hwm` as libzmq's SNDHWM (0: no bound). Past it the message is dropped for that subscriber only.
 */
export function hwmAllows(queued: number, hwm: number): boolean {
  return hwm === 0 || queued < hwm;
}

type Phase = "greeting" | "handshake" | "open" | "closed";

/**
 * One connection's protocol state. `start()` gives the greeting to send at once; `feed(chunk)` takes whatever
 * the peer sent and returns what it means, in order.
 */
export class ZmtpSession {
  private phase: Phase = "greeting";
  /** the peer's greeting as it arrives (dropped once read: an idle connection keeps no buffer) */
  private head: Buffer | undefined = Buffer.alloc(greetingBytes);
  private headLen = 0;
  /** the frame being read: its flags, its size as read so far and the size bytes still expected, its body and how much of it arrived */
  private flags = -1;
  private size = 0;
  private sizeNeed = 0;
  private sizeHave = 0;
  private body: Buffer | undefined;
  private bodyHave = 0;
  /** the data message being assembled, and its bytes so far */
  private frames: Buffer[] = [];
  private messageBytes = 0;
  /** ROUTER: bytes of the current frame still to drop, and the number of frames kept before the message crossed its bound (-1: it has not) */
  private skip = 0;
  private oversizedAt = -1;
  private framesDropped = 0;
  private minor = 0;
  readonly subscriptions = new Subscriptions();
  /** the peer's Socket-Type once it said READY */
  peerType: string | undefined;

  constructor(
    readonly role: ZmtpRole,
    readonly limits: ZmtpLimits = zmtpLimits[role],
  ) {}

  /** The greeting to write when the connection opens. */
  start(): Buffer {
    return greeting();
  }

  get closed(): boolean {
    return this.phase === "closed";
  }

  feed(chunk: Uint8Array): ZmtpEvent[] {
    const out: ZmtpEvent[] = [];
    let i = 0;
    while (i < chunk.length && this.phase !== "closed") {
      if (this.phase === "greeting") {
        i = this.readGreeting(chunk, i, out);
        continue;
      }
      if (this.flags < 0) {
        this.flags = chunk[i++]!;
        this.sizeNeed = this.flags & FLAG_LONG ? 8 : 1;
        this.sizeHave = 0;
        this.size = 0;
        continue;
      }
      if (this.sizeHave < this.sizeNeed) {
        // big-endian; a size past any bound is refused in beginBody, and 2^53 is far past all of them
        this.size = Math.min(this.size * 256 + chunk[i++]!, Number.MAX_SAFE_INTEGER);
        if (++this.sizeHave === this.sizeNeed) this.beginBody(out);
        continue;
      }
      if (this.skip > 0) {
        const n = Math.min(this.skip, chunk.length - i);
        this.skip -= n;
        i += n;
        if (this.skip === 0) this.endFrame(out);
        continue;
      }
      const body = this.body!;
      const n = Math.min(body.length - this.bodyHave, chunk.length - i);
      body.set(chunk.subarray(i, i + n), this.bodyHave);
      this.bodyHave += n;
      i += n;
      if (this.bodyHave === body.length) this.endFrame(out);
    }
    return out;
  }

  private close(out: ZmtpEvent[], reason: string): void {
    this.phase = "closed";
    this.head = undefined;
    this.body = undefined;
    this.skip = 0;
    this.frames = [];
    out.push({ k: "close", reason });
  }

  private readGreeting(chunk: Uint8Array, i: number, out: ZmtpEvent[]): number {
    const head = this.head!;
    const n = Math.min(greetingBytes - this.headLen, chunk.length - i);
    head.set(chunk.subarray(i, i + n), this.headLen);
    const before = this.headLen;
    this.headLen += n;
    const has = (b: number) => before <= b && this.headLen > b;
    if (has(0) && head[0] !== 0xff) {
      this.close(out, "not a ZMTP peer (first byte is not 0xFF)");
    } else if (has(signatureBytes - 1) && (head[signatureBytes - 1]! & 1) === 0) {
      this.close(out, "ZMTP 1.0 peer (libzmq 2.x): not supported, ZMTP 3.x is");
    } else if (has(10) && head[10]! < 3) {
      this.close(out, `ZMTP ${head[10] === 1 ? "2.0 (libzmq 3.x)" : `revision ${head[10]}`} peer: not supported, ZMTP 3.x is`);
    } else if (this.headLen === greetingBytes) {
      this.head = undefined;
      this.minor = head[10]! > 3 ? 1 : head[11]!;
      const mech = head.subarray(mechanismOffset, mechanismOffset + mechanismBytes);
      const end = mech.indexOf(0);
      const name = mech.toString("latin1", 0, end < 0 ? mechanismBytes : end);
      if (name !== "NULL" || (end >= 0 && mech.subarray(end).some((b) => b !== 0))) {
        this.close(out, `security mechanism ${JSON.stringify(name)} is not supported (NULL is; Salt uses no ZMQ security)`);
      } else {
        this.phase = "handshake";
        out.push({ k: "send", bytes: readyCommand(this.role) });
      }
    }
    return i + n;
  }

  private beginBody(out: ZmtpEvent[]): void {
    const size = this.size;
    const command = (this.flags & FLAG_COMMAND) !== 0;
    if (command && size > this.limits.commandBytesMax) return this.close(out, `command of ${size} bytes (at most ${this.limits.commandBytesMax})`);
    if (!command && this.phase === "handshake") return this.close(out, "data frame before READY");
    if (!command && (this.oversizedAt >= 0 || this.messageBytes + size > this.limits.frameBytesMax)) {
      // a request too large is read through and answered (every request gets a reply); anything else too large closes
      if (this.role !== "ROUTER" || this.messageBytes + size > oversizedBytesMax) return this.close(out, `message of more than ${this.limits.frameBytesMax} bytes`);
      if (this.oversizedAt < 0) this.oversizedAt = this.frames.length;
      this.messageBytes += size;
      this.skip = size;
      this.body = undefined;
      if (size === 0) this.endFrame(out);
      return;
    }
    // a body of its own (not a view of a read chunk): request bodies are posted to worker threads, which copy a
    // view's whole backing store
    this.body = Buffer.allocUnsafeSlow(size);
    this.bodyHave = 0;
    if (size === 0) this.endFrame(out);
  }

  private endFrame(out: ZmtpEvent[]): void {
    const body = this.body;
    const flags = this.flags;
    this.body = undefined;
    this.flags = -1;
    if (flags & FLAG_COMMAND) return this.command(body!, out);
    if (body) {
      this.frames.push(body);
      this.messageBytes += body.length;
    } else this.framesDropped++;
    if (this.frames.length + this.framesDropped > this.limits.messageFramesMax) return this.close(out, `message of more than ${this.limits.messageFramesMax} frames`);
    if (flags & FLAG_MORE) return;
    const frames = this.frames;
    const bytes = this.messageBytes;
    const oversizedAt = this.oversizedAt;
    this.frames = [];
    this.messageBytes = 0;
    this.framesDropped = 0;
    this.oversizedAt = -1;
    if (oversizedAt >= 0) out.push({ k: "oversized", envelope: frames.slice(0, oversizedAt), bytes });
    else this.message(frames, out);
  }

  private command(body: Buffer, out: ZmtpEvent[]): void {
    const nameLen = body[0] ?? 0;
    if (nameLen === 0 || 1 + nameLen > body.length) return this.close(out, "malformed command");
    const name = body.toString("latin1", 1, 1 + nameLen);
    const data = body.subarray(1 + nameLen);
    if (this.phase === "handshake") {
      if (name === "ERROR") return this.close(out, `peer sent ERROR: ${data.subarray(1, 1 + (data[0] ?? 0)).toString("latin1")}`);
      if (name !== "READY") return this.close(out, `${JSON.stringify(name)} before READY`);
      const props = readProperties(data);
      if (!props) return this.close(out, "malformed READY properties");
      const type = props.get("socket-type")?.toString("latin1");
      if (!type || !ACCEPTS[this.role].includes(type)) return this.close(out, `a ${type ?? "untyped"} socket cannot talk to a ${this.role} socket`);
      this.peerType = type;
      this.phase = "open";
      out.push({ k: "ready", socketType: type, identity: props.get("identity") ?? Buffer.alloc(0), minor: this.minor });
      return;
    }
    switch (name) {
      case "PING": {
        if (data.length < 2 || data.length > 2 + 16) return this.close(out, "malformed PING");
        out.push({ k: "send", bytes: encodeCommand("PONG", data.subarray(2)) });
        return;
      }
      case "PONG":
        return;
      case "SUBSCRIBE":
      case "CANCEL":
        if (this.role === "PUB") return this.subscription(name === "SUBSCRIBE", Buffer.from(data), out);
        out.push({ k: "ignored", what: `${name} command to a ROUTER` });
        return;
      case "READY":
        return this.close(out, "second READY");
      case "ERROR":
        return this.close(out, "peer sent ERROR");
      default:
        out.push({ k: "ignored", what: `unknown command ${JSON.stringify(name)}` });
    }
  }

  private message(frames: Buffer[], out: ZmtpEvent[]): void {
    if (this.role === "ROUTER") {
      out.push({ k: "message", frames });
      return;
    }
    const f = frames[0]!;
    if (frames.length === 1 && f.length > 0 && (f[0] === 1 || f[0] === 0)) return this.subscription(f[0] === 1, f.subarray(1), out);
    out.push({ k: "ignored", what: "a message to a PUB socket that is not a subscription" });
  }

  private subscription(on: boolean, topic: Buffer, out: ZmtpEvent[]): void {
    if (topic.length > this.limits.topicBytesMax) return this.close(out, `subscription topic of ${topic.length} bytes (at most ${this.limits.topicBytesMax})`);
    if (on) {
      if (!this.subscriptions.has(topic) && this.subscriptions.size >= this.limits.subscriptionsMax) return this.close(out, `more than ${this.limits.subscriptionsMax} subscriptions`);
      this.subscriptions.add(topic);
      out.push({ k: "subscribe", topic });
    } else {
      this.subscriptions.remove(topic);
      out.push({ k: "cancel", topic });
    }
  }
}
