/**
 * Messages between the swarm's parent and its workers, and the events workers report. Workers batch their
 * events (every 100 ms or 500 events) so thousands of minions cost a few IPC messages per second.
 * Times are epoch milliseconds from `nowMs()`, comparable across the processes of one host.
 */
import type { Protocol } from "../../src/lib/minion/sign-in.js";

/** What every minion of a worker is configured with. */
export interface MinionSettings {
  master: string;
  retPort: number;
  publishPort?: number;
  protocol: Protocol;
  keyDir: string;
  /** minion i signs in with key slot i % keySlots (several ids share a key, as Salt allows; 0 or unset: slot i) */
  keySlots?: number;
  idPrefix: string;
  idWidth: number;
  acceptanceWaitMs: number;
  acceptanceWaitMaxMs: number;
  authDeadlineMs: number;
  authTimeoutMs: number;
  authTries: number;
  requestTimeoutMs: number;
  requestTries: number;
  randomReauthDelayMs: number;
  reconDefaultMs: number;
  reconMaxMs: number;
  pubMonitor: boolean;
  /** spread minions over 127.0.0.2 … 127.0.0.(1+sourceIps) (0 = connect from the default address) */
  sourceIps: number;
  /** what the cmd.run stand-in prints for commands it does not know (default: "not found", retcode 127) */
  cmdRunOutput?: string;
}

export interface WorkerInit {
  settings: MinionSettings;
  /** the minion numbers this worker runs */
  indices: number[];
  /** libzmq I/O threads for this worker's context */
  ioThreads: number;
}

export type ToWorker =
  | { t: "init"; init: WorkerInit }
  | { t: "start"; indices?: number[]; startupDelayMs?: number; inFlight?: number }
  | { t: "churn"; indices: number[]; minDelayMs: number; maxDelayMs: number }
  | { t: "shutdown" }
  /** every up minion signs in again (`_auth` only), at most `inFlight` at a time in this worker */
  | { t: "reauth"; inFlight: number }
  /** minions hold (true) or send (false) the returns of the jobs they run */
  | { t: "holdReturns"; on: boolean }
  /** every minion sends the returns it held, one after the other, at most `inFlight` minions at a time */
  | { t: "sendHeld"; inFlight: number };

export type SwarmEvent =
  | { k: "auth"; i: number; result: string; ms: number; attempt: number; reason: string; detail?: string; at: number }
  | { k: "up"; i: number; ms: number; authMs: number; at: number; restart: boolean }
  | { k: "startFailed"; i: number; code: string; detail: string; at: number }
  | { k: "down"; i: number; at: number }
  | { k: "publish"; i: number; jid: string; at: number }
  | { k: "return"; i: number; jid: string; at: number; retcode: unknown }
  | { k: "returnFailed"; i: number; jid: string; code: string; detail: string; at: number }
  | { k: "badLoad"; i: number; cmd: string; at: number }
  | { k: "reauth"; i: number; reason: string; at: number }
  | { k: "drop"; i: number; reason: string; detail?: string; at: number }
  | { k: "problem"; i: number; where: string; detail: string; at: number }
  | { k: "timeout"; i: number; what: string; attempt: number; tries: number; at: number };

export interface WorkerUsage {
  pid: number;
  minions: number;
  rssMb: number;
  cpuUserS: number;
  cpuSystemS: number;
  /** open file descriptors at the end */
  fds: number;
}

export type FromWorker =
  | { t: "ready"; loaded: number; ms: number; fds: number }
  | { t: "events"; batch: SwarmEvent[] }
  | { t: "error"; code: string; detail: string }
  | { t: "bye"; usage: WorkerUsage }
  /** a reauth or sendHeld round of this worker finished */
  | { t: "done"; what: "reauth" | "sendHeld" };

export function minionId(s: Pick<MinionSettings, "idPrefix" | "idWidth">, i: number): string {
  return `${s.idPrefix}${String(i).padStart(s.idWidth, "0")}`;
}

export function sourceIpOf(s: Pick<MinionSettings, "sourceIps">, i: number): string | undefined {
  if (!s.sourceIps) return undefined;
  const k = i % s.sourceIps;
  return `127.0.${Math.floor(k / 250)}.${2 + (k % 250)}`;
}
