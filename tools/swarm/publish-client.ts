/**
 * Publishing a job the way Salt's `salt` CLI does (`salt/client/__init__.py: LocalClient.pub`): a clear
 * `publish` request on the master's request port carrying the master's root key (`cachedir/.root_key`),
 * answered in clear with the jid and the expected minions. It works the same against brine and against
 * the Python salt-master.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import type * as zmq from "zeromq";
import { BrineError } from "../../src/shared/errors.js";
import { decodeWire, isMap, type WireValue } from "../../src/shared/protocol/msgpack.js";
import type { CoarseTimer } from "../../src/shared/coarse-timer.js";
import { ZmqReqTransport } from "../../src/lib/zmq-req-client.js";
import { packSalt } from "../../src/lib/minion/wire.js";
import { publishLoad, type PublishFields } from "../../src/lib/client/publish-load.js";

/** What a job publish carries (the CLI's fields). */
export type PublishJob = PublishFields;

export interface PublishReply {
  jid: string;
  minions: string[];
  missing: string[];
}

export interface PublishClientOptions {
  host: string;
  port: number;
  /** the root key text (contents of .root_key) */
  key: string;
  /** the user the key belongs to; "root" for .root_key */
  user?: string;
  /** per-try timeout (ms); the CLI's -t default is 5 s, with 3 tries */
  timeoutMs?: number;
  tries?: number;
  context?: zmq.Context;
  timer?: CoarseTimer;
}

/** Read a master key file (`.root_key`, `.<user>_key`); the user comes from the file name when it follows that pattern. */
export function readRootKey(file: string): { key: string; user: string } {
  let key: string;
  try {
    key = readFileSync(file, "utf8").trim();
  } catch (e) {
    throw new BrineError("SWARM_OPTIONS", `cannot read the root key ${file}: ${(e as Error).message}`);
  }
  if (!key) throw new BrineError("SWARM_OPTIONS", `the root key file ${file} is empty`);
  const m = /^\.(.+)_key$/.exec(path.basename(file));
  return { key, user: m ? m[1]! : "root" };
}

function errorText(e: WireValue): string {
  if (isMap(e)) return [e.name, e.message].filter((x) => typeof x === "string").join(": ") || JSON.stringify(e);
  return String(e);
}

export class PublishClient {
  private readonly transport: ZmqReqTransport;

  constructor(private readonly opts: PublishClientOptions) {
    this.transport = new ZmqReqTransport({ host: opts.host, port: opts.port }, { context: opts.context, timer: opts.timer });
  }

  /** The publish request's load, in the CLI's key order. */
  load(job: PublishJob): Record<string, unknown> {
    return publishLoad(job, this.opts.key, this.opts.user ?? "root");
  }

  async publish(job: PublishJob): Promise<PublishReply> {
    const body = packSalt({ enc: "clear", load: this.load(job), version: 3 });
    let raw: Buffer;
    try {
      raw = await this.transport.request(body, { timeoutMs: this.opts.timeoutMs ?? 5_000, tries: this.opts.tries ?? 3 });
    } catch (e) {
      throw new BrineError("SWARM_PUBLISH", `no reply from ${this.opts.host}:${this.opts.port}: ${(e as Error).message}`);
    }
    const reply = decodeWire(raw);
    const load = isMap(reply) && isMap(reply.load) ? reply.load : reply;
    if (!isMap(load)) throw new BrineError("SWARM_PUBLISH", `unexpected reply ${JSON.stringify(String(load))}`);
    if (load.error !== undefined) throw new BrineError("SWARM_PUBLISH", errorText(load.error));
    const strs = (v: WireValue) => (Array.isArray(v) ? v.map(String) : []);
    if (typeof load.jid !== "string" || !load.jid) {
      throw new BrineError("SWARM_PUBLISH", `no jid: ${JSON.stringify({ minions: strs(load.minions ?? []), error: load.error ?? null })}`);
    }
    return { jid: load.jid, minions: strs(load.minions ?? []), missing: strs(load.missing ?? []) };
  }

  close(): void {
    this.transport.close();
  }
}
