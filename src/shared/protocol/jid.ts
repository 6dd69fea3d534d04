/**
 * Job ids as Salt makes them: UTC `%Y%m%d%H%M%S%f` (20 digits, microseconds). JS clocks give
 * milliseconds, so the generator keeps the last jid and bumps the microsecond part to stay unique and
 * increasing within one process (Salt does the same when two jids fall in the same microsecond).
 */

function pad(n: number, w: number): string {
  return String(n).padStart(w, "0");
}

export function formatJid(ms: number, micros: number): string {
  const d = new Date(ms);
  return (
    pad(d.getUTCFullYear(), 4) +
    pad(d.getUTCMonth() + 1, 2) +
    pad(d.getUTCDate(), 2) +
    pad(d.getUTCHours(), 2) +
    pad(d.getUTCMinutes(), 2) +
    pad(d.getUTCSeconds(), 2) +
    pad(d.getUTCMilliseconds() * 1000 + micros, 6)
  );
}

/**
 * Masters of one cluster draw jids from disjoint sets: with a slot set, a master's jids are the microsecond
 * timestamps `≡ slot (mod JID_SLOTS)`. Without it two masters publishing in the same millisecond made the same
 * jid (each starts every millisecond at microsecond 0), and a minion drops a publish whose jid it has seen: one of
 * the two jobs was lost, and with ring placement their returns merged. A master makes JID_SLOTS / 1000 µs =
 * 31 jids per millisecond before its jid clock runs ahead of time (still unique and increasing).
 */
export const JID_SLOTS = 32;

/**
 * Unique, increasing jids. With `shared` (a BigInt64Array over a SharedArrayBuffer: [0] the last jid's
 * microsecond timestamp, [1] this master's jid slot + 1, 0 while it has none), every thread of the process draws
 * from one sequence by CAS, so two workers never hand out the same jid in the same millisecond.
 */
export class JidGenerator {
  private readonly last: BigInt64Array;
  /** @param now injected clock (ms since epoch) */
  constructor(
    private readonly now: () => number = Date.now,
    shared?: BigInt64Array,
  ) {
    this.last = shared ?? new BigInt64Array(2);
  }

  next(): string {
    for (;;) {
      const prev = Atomics.load(this.last, 0);
      const t = BigInt(this.now()) * 1000n;
      let us = t > prev ? t : prev + 1n;
      const slot = this.last.length > 1 ? Atomics.load(this.last, 1) : 0n;
      if (slot > 0n) us += (slot - 1n - (us % BigInt(JID_SLOTS)) + BigInt(JID_SLOTS)) % BigInt(JID_SLOTS);
      if (Atomics.compareExchange(this.last, 0, prev, us) === prev) {
        const ms = Number(us / 1000n);
        return formatJid(ms, Number(us % 1000n));
      }
    }
  }
}

export function sharedJidClock(): BigInt64Array {
  return new BigInt64Array(new SharedArrayBuffer(16));
}

/**
 * Sets this master's jid slot from the cluster group's members (voters and learners): its index among their sorted
 * node ids, modulo JID_SLOTS (so masters up to JID_SLOTS never share one). Every master sees the same membership
 * once committed, so the slots are disjoint; while a change is on its way two masters may briefly hold one slot,
 * which costs a collision only if they also publish in the same microsecond. Returns the slot, or undefined when
 * this master is not a member (the jids stay unslotted).
 */
export function setJidSlot(clock: BigInt64Array, self: string, members: readonly string[]): number | undefined {
  const i = [...new Set(members)].sort().indexOf(self);
  Atomics.store(clock, 1, i < 0 ? 0n : BigInt((i % JID_SLOTS) + 1));
  return i < 0 ? undefined : i % JID_SLOTS;
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** Salt's jid_to_time: `YYYY, Mon DD hh:mm:ss.ffffff`; "" for a malformed jid. */
export function jidToTime(jid: string): string {
  // slices, not a seven-group regex: jobs.list_jobs formats every job in the cache (100,000 and more)
  if (jid.length < 20) return "";
  for (let i = 0; i < 20; i++) {
    const c = jid.charCodeAt(i);
    if (c < 48 || c > 57) return "";
  }
  const month = MONTHS[Number(jid.slice(4, 6)) - 1];
  if (!month) return "";
  return `${jid.slice(0, 4)}, ${month} ${jid.slice(6, 8)} ${jid.slice(8, 10)}:${jid.slice(10, 12)}:${jid.slice(12, 14)}.${jid.slice(14, 20)}`;
}

/** Milliseconds since the epoch encoded in a jid (for cleanup by age), or NaN. */
export function jidToMs(jid: string): number {
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{3})/.exec(jid);
  if (!m) return NaN;
  return Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!, +m[7]!);
}
