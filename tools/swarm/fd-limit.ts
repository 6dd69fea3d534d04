/**
 * File-descriptor budget, checked before any socket is opened. Each minion holds a REQ and a SUB socket;
 * each ZeroMQ socket costs a TCP descriptor and a mailbox eventfd, and the SUB's connection monitor adds
 * two more sockets. A process that runs out of descriptors fails in odd places (EMFILE inside libzmq), so
 * the swarm refuses to start instead and says what to change.
 */
import { readFileSync } from "node:fs";
import { BrineError } from "../../src/shared/errors.js";

export interface FdLimits {
  soft: number;
  hard: number;
}

/** The open-files limits of this process (Linux /proc/self/limits); undefined elsewhere. */
export function fdLimits(limitsText?: string): FdLimits | undefined {
  let text = limitsText;
  if (text === undefined) {
    try {
      text = readFileSync("/proc/self/limits", "utf8");
    } catch {
      return undefined;
    }
  }
  const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(text);
  if (!m) return undefined;
  const num = (s: string) => (s === "unlimited" ? Number.POSITIVE_INFINITY : Number(s));
  return { soft: num(m[1]!), hard: num(m[2]!) };
}

/** Descriptors one minion needs (measured: REQ 2, SUB 2, monitor 2). */
export function fdsPerMinion(pubMonitor: boolean): number {
  return pubMonitor ? 6 : 4;
}

/** Fixed overhead per process (node, libzmq context, IPC, logs) plus room for reconnects. */
export const fdOverhead = 128;

export interface FdPlan {
  perProcess: number;
  need: number;
  limits: FdLimits | undefined;
}

/**
 * Throw SWARM_FD_LIMIT, with what to do about it, when `minions` split over `procs` processes would not
 * fit in the open-files limit. `alreadyOpen` counts descriptors this process holds now (in-process runs).
 */
export function checkFdLimit(minions: number, procs: number, pubMonitor: boolean, alreadyOpen = 0, limits = fdLimits()): FdPlan {
  const perProcess = Math.ceil(minions / Math.max(1, procs));
  const per = fdsPerMinion(pubMonitor);
  const need = perProcess * per + fdOverhead + alreadyOpen;
  if (limits && need > limits.soft) {
    const usable = Math.max(1, limits.soft - fdOverhead - alreadyOpen);
    const procsNeeded = Math.ceil((minions * per) / usable);
    const hints = [
      limits.hard >= need
        ? `raise the limit (ulimit -n ${need}; the hard limit is ${limits.hard})`
        : `raise the hard limit (it is ${Number.isFinite(limits.hard) ? limits.hard : "unlimited"}; set nofile in /etc/security/limits.conf or LimitNOFILE)`,
      `spread the minions over more processes (--procs ${procsNeeded})`,
    ];
    if (pubMonitor) hints.push("or drop the SUB connection monitor (--no-pub-monitor: 4 descriptors per minion instead of 6)");
    throw new BrineError(
      "SWARM_FD_LIMIT",
      `${perProcess} minions per process need about ${need} file descriptors (${per} each + ${fdOverhead + alreadyOpen}), ` +
        `but the open-files limit is ${limits.soft}. To fix: ${hints.join("; ")}.`,
    );
  }
  return { perProcess, need, limits };
}
