/**
 * The master's metrics as families (name, help, type, samples), built from what any thread can read: the
 * metrics board (board.ts), the Raft worker's status and the shared ring (clustered), the count of connected
 * minions and open fds. The Prometheus endpoint (exporter.ts) and `salt-run brine.stats` (runners/brine.ts)
 * both print these, so an operator sees the same names and numbers in both.
 *
 * Names: Salt 3007 has no OpenTelemetry or Prometheus instrumentation (its only figures are `master_stats`
 * events: per-command mean time and runs), so the names are issue #17's `salt.*` names in Prometheus form
 * (dots to underscores, `_total` on counters, `_seconds` on durations); figures Salt has no name for are
 * `brine_*`.
 */
import type { NodeStatus } from "../../workers/raft/api.js";
import type { RingReader } from "../sab-ring/reader.js";
import { ringSlots } from "../sab-ring/layout.js";
import type { BoardSnapshot } from "./board.js";
import type { StateSyncStatus } from "../cluster-health.js";
import { REQUEST_BUCKETS_US } from "./labels.js";
import { COMMIT_LATENCY_BUCKETS_MS } from "./latency-window.js";

export type Labels = Record<string, string>;

export interface ValueSample {
  labels: Labels;
  value: number;
}

/** A histogram series: cumulative counts per upper bound (`le`), the last being +Inf. */
export interface HistogramSample {
  labels: Labels;
  cumulative: number[];
  sum: number;
  count: number;
}

export type Family =
  | { name: string; help: string; type: "counter" | "gauge"; samples: ValueSample[] }
  | { name: string; help: string; type: "histogram"; le: readonly number[]; samples: HistogramSample[] };

/** Everything families() reads besides the board; each part absent when this master has none. */
export interface FamilySources {
  board: BoardSnapshot;
  /** accepted minions connected to this master (presence.ts localPresent) */
  connected?: number;
  /** the Raft worker's status (cluster_id) */
  raft?: NodeStatus;
  /** the shared ring buffer (cluster_id) */
  ring?: RingReader;
  /** the state-sync thread's status file (cluster_id), checked; with `now` (epoch ms) for its ages */
  stateSync?: StateSyncStatus;
  now?: number;
}

/** State-sync series (channel × peer) shown at most; the file names cluster peers, this bounds a file that grew. */
export const stateSyncSeriesMax = 256;

function cumulative(counts: readonly number[]): number[] {
  let run = 0;
  return counts.map((c) => (run += c));
}

const REQUEST_LE_S = REQUEST_BUCKETS_US.map((us) => us / 1e6);
const COMMIT_LE_S = COMMIT_LATENCY_BUCKETS_MS.map((ms) => ms / 1e3);

/** Every family, in a stable order. */
export function families(src: FamilySources): Family[] {
  const b = src.board;
  const out: Family[] = [
    {
      name: "salt_master_requests_handled_total",
      help: "Requests the request workers answered, by command (Salt's salt.master.requests.handled)",
      type: "counter",
      samples: b.requests.map((r) => ({ labels: { cmd: r.cmd }, value: r.count })),
    },
    {
      name: "salt_master_requests_duration_seconds",
      help: "Time a request worker spent on a request, decode to reply, durable writes included (Salt's salt.master.requests.duration)",
      type: "histogram",
      le: REQUEST_LE_S,
      samples: b.requests.map((r) => ({ labels: { cmd: r.cmd }, cumulative: cumulative(r.buckets), sum: r.sumUs / 1e6, count: r.count })),
    },
    {
      name: "salt_auth_attempts_total",
      help: "Minion sign-ins (_auth) answered, by result: accept, pend, reject, denied, full, invalid (Salt's salt.auth.attempts)",
      type: "counter",
      samples: b.auth.map((a) => ({ labels: { result: a.result }, value: a.n })),
    },
    {
      name: "salt_jobs_published_total",
      help: "Jobs published by this master, by function (Salt's salt.jobs.published)",
      type: "counter",
      samples: b.published.map((p) => ({ labels: { fun: p.fun }, value: p.n })),
    },
    {
      name: "salt_jobs_completed_total",
      help: "Minion returns stored, by function and success (Salt's salt.jobs.completed)",
      type: "counter",
      samples: b.completed.map((c) => ({ labels: { fun: c.fun, success: String(c.success) }, value: c.n })),
    },
    {
      name: "salt_events_fired_total",
      help: "Events this master fired on its bus, by tag prefix (Salt's salt.events.fired)",
      type: "counter",
      samples: b.events.map((e) => ({ labels: { tag_prefix: e.tagPrefix }, value: e.n })),
    },
    {
      name: "brine_request_lane_depth",
      help: "Requests waiting in or worked on by each request lane (sampled every second)",
      type: "gauge",
      samples: b.laneDepth.map((l) => ({ labels: { lane: l.lane }, value: l.n })),
    },
    {
      name: "brine_request_lane_refused_total",
      help: "Requests a lane answered 'retry later' without work: queue_full (brine_queue_len_max), stale (a sign-in older than brine_auth_stale_ms), gone (a sign-in whose connection closed before its turn), decode_budget (answered 'bad load': decoding it would pass its request thread's decode budget)",
      type: "counter",
      samples: b.laneRefused.map((r) => ({ labels: { lane: r.lane, reason: r.reason }, value: r.n })),
    },
    {
      name: "brine_send_queue_length",
      help: "Messages waiting for a ZeroMQ socket on the main thread: router (replies), publish (sampled every second)",
      type: "gauge",
      samples: b.sendQueues.map((q) => ({ labels: { queue: q.queue }, value: q.length })),
    },
    {
      name: "brine_send_queue_dropped_total",
      help: "Messages a main-thread send queue dropped: queue full, or the socket refused the send (publish: a minion missed a publish)",
      type: "counter",
      samples: b.sendQueues.map((q) => ({ labels: { queue: q.queue }, value: q.dropped })),
    },
    {
      name: "brine_publish_frames_total",
      help: "Publishes sent on the publish port, each one frame to every subscribed minion (a minion past pub_hwm misses it uncounted: libzmq does not report those drops)",
      type: "counter",
      samples: [{ labels: {}, value: b.publishFrames }],
    },
    {
      name: "brine_sign_ins_resent_total",
      help: "Sign-ins sent again (the same bytes) and answered at once with the reply their first copy got, not worked on again",
      type: "counter",
      samples: [{ labels: {}, value: b.signInsResent }],
    },
    {
      name: "brine_handshake_timeouts_total",
      help: "Connections a minion-facing port closed for not finishing their ZMTP handshake within 30 s (native transport only: libzmq does not say)",
      type: "counter",
      samples: b.handshakeTimeouts.map((h) => ({ labels: { port: h.port }, value: h.n })),
    },
    {
      name: "brine_publisher_total",
      help: "Publishes the publisher thread handled, by what it did: sealed (encrypted here), signed (an RSA signature made here), passed (a peer's sealed frame sent as it came), refused (a peer's sealed frame not sent as it came, its load sealed here), dropped (not sealable)",
      type: "counter",
      samples: b.publisher.map((p) => ({ labels: { what: p.what }, value: p.n })),
    },
    {
      name: "brine_event_bus_events_total",
      help: "Events this master put on its local event bus (master_event_pub.ipc)",
      type: "counter",
      samples: [{ labels: {}, value: b.bus.events }],
    },
    {
      name: "brine_event_bus_readers",
      help: "Readers connected to the local event bus (salt, salt-run, the API's event feed; sampled every second)",
      type: "gauge",
      samples: [{ labels: {}, value: b.bus.readers }],
    },
    {
      name: "brine_event_bus_readers_dropped_total",
      help: "Event bus readers disconnected for not reading: queue_full (pub_server_write_queue_size), drain_timeout (publish_drain_timeout), backlog_bytes (64 MiB unsent)",
      type: "counter",
      samples: b.bus.dropped.map((d) => ({ labels: { reason: d.reason }, value: d.n })),
    },
  ];
  // no sample while the first count is still being made
  const connected = src.connected === undefined ? [] : [{ labels: {}, value: src.connected }];
  out.push({ name: "brine_minions_connected", help: "Accepted minions connected to this master (brine_presence; counted at most every 30 s)", type: "gauge", samples: connected });
  if (src.raft) {
    out.push(...raftFamilies(src.raft));
    out.push({
      name: "brine_nonce_owner_total",
      help: "The nonce owner check between masters (replays of one frame sent to several): asks (batches of this master's workers with other masters' minions), asked_remote (nonces sent to their decider), seen_remote (of them, replays refused), undecided (accepted without a verdict: the decider failed or was slow), stand_in (accepted on a stand-in's word while the owner was passed over), decided and decided_seen (peers' nonces decided here, seen before), refused (malformed asks)",
      type: "counter",
      samples: b.nonceOwner.map((x) => ({ labels: { what: x.what }, value: x.n })),
    });
  }
  if (src.ring) out.push(...ringFamilies(src.ring));
  if (src.stateSync) out.push(...stateSyncFamilies(src.stateSync, src.now ?? Date.now()));
  return out;
}

/** State-sync per channel and peer, from the status file: bytes and items carried, transfers, lag, last transfer's age. */
function stateSyncFamilies(st: StateSyncStatus, now: number): Family[] {
  const bytes: ValueSample[] = [];
  const items: ValueSample[] = [];
  const transfers: ValueSample[] = [];
  const lag: ValueSample[] = [];
  const age: ValueSample[] = [];
  const ms = (t: number | string | undefined) => (typeof t === "number" ? t : typeof t === "string" ? Date.parse(t) : NaN);
  let n = 0;
  for (const [channel, peers] of Object.entries(st)) {
    for (const [peer, e] of Object.entries(peers)) {
      if (n++ >= stateSyncSeriesMax) break;
      const labels = { channel, peer };
      bytes.push({ labels, value: e.bytes_total ?? e.bytes });
      items.push({ labels, value: e.items_total ?? e.items });
      transfers.push({ labels, value: e.transfers ?? 1 });
      const behind = ms(e.behind_since);
      lag.push({ labels, value: Number.isFinite(behind) ? Math.max(0, (now - behind) / 1000) : 0 });
      const at = ms(e.at);
      if (Number.isFinite(at) && (e.transfers ?? 1) > 0) age.push({ labels, value: Math.max(0, (now - at) / 1000) });
    }
  }
  return [
    { name: "brine_state_sync_bytes_total", help: "Bytes of items this master installed from each peer, by channel (keys, denied_keys, file_roots, pillar_roots, job-cache banks)", type: "counter", samples: bytes },
    { name: "brine_state_sync_items_total", help: "Items this master installed from each peer, by channel", type: "counter", samples: items },
    { name: "brine_state_sync_transfers_total", help: "Transfers (pulls) from each peer that ended, by channel, including those that found nothing to carry", type: "counter", samples: transfers },
    { name: "brine_state_sync_lag_seconds", help: "Seconds since a peer announced key content this master has not pulled yet (0: none outstanding)", type: "gauge", samples: lag },
    { name: "brine_state_sync_last_transfer_age_seconds", help: "Seconds since the last transfer from each peer ended, by channel", type: "gauge", samples: age },
  ];
}

/** Raft: per group, from the worker's status (a counter there is counted by the worker since it started). */
function raftFamilies(st: NodeStatus): Family[] {
  const g = (name: string, help: string, type: "counter" | "gauge", value: (s: NodeStatus["groups"][number]) => number): Family => ({
    name,
    help,
    type,
    samples: st.groups.map((s) => ({ labels: { group: s.group }, value: value(s) })),
  });
  const lag: ValueSample[] = [];
  for (const s of st.groups) {
    if (!s.progress) continue; // only a leader knows its learners' progress
    for (const learner of s.learners) {
      const p = s.progress[learner];
      if (p) lag.push({ labels: { group: s.group, learner }, value: Math.max(0, s.lastIndex - p.match) });
    }
  }
  return [
    g("brine_raft_term", "Raft term of each group on this master", "gauge", (s) => s.term),
    g("brine_raft_commit_index", "Raft commit index of each group", "gauge", (s) => s.commit),
    g("brine_raft_applied_index", "Raft index applied to each group's state machines", "gauge", (s) => s.applied),
    g("brine_raft_is_leader", "1 when this master leads the group", "gauge", (s) => (s.role === "leader" ? 1 : 0)),
    g("brine_raft_elections_total", "Elections this master started for the group (became candidate)", "counter", (s) => s.elections ?? 0),
    {
      name: "brine_raft_learner_lag_entries",
      help: "Leader only: log entries each learner is behind the leader's last index",
      type: "gauge",
      samples: lag,
    },
    {
      name: "brine_raft_commit_latency_seconds",
      help: "Proposals made on this master, from the Raft worker taking them to their result (committed by a quorum, applied)",
      type: "histogram",
      le: COMMIT_LE_S,
      samples: st.groups
        .filter((s) => s.commitHistogram)
        .map((s) => ({ labels: { group: s.group }, cumulative: cumulative(s.commitHistogram!.counts), sum: s.commitHistogram!.sumMs / 1e3, count: s.commitHistogram!.count })),
    },
    { name: "brine_raft_durable_commits_total", help: "Raft log fsyncs of this master's Raft worker", type: "counter", samples: [{ labels: {}, value: st.commits }] },
  ];
}

/** The shared ring: how many of the ring's slots each node owns, and Salt's drop_stats. */
function ringFamilies(ring: RingReader): Family[] {
  const owned: ValueSample[] = [];
  const epochs: ValueSample[] = [];
  for (const name of ring.rings()) {
    const view = ring.view(name);
    if (!view) continue;
    epochs.push({ labels: { ring: name }, value: view.epoch });
    const per = new Array<number>(view.nodes.length).fill(0);
    for (let s = 0; s < ringSlots; s++) {
      const o = view.owners[s]!;
      if (o < per.length) per[o]!++;
    }
    view.nodes.forEach((node, i) => owned.push({ labels: { ring: name, node }, value: per[i]! }));
  }
  const drops: ValueSample[] = [];
  for (const [dataType, d] of Object.entries(ring.dropStats())) {
    drops.push({ labels: { data_type: dataType, reason: "not_a_member" }, value: d.not_a_member });
    drops.push({ labels: { data_type: dataType, reason: "other_ring_member" }, value: d.other_ring_member });
  }
  return [
    { name: "brine_ring_epoch", help: "Epoch of each ring in the shared ring buffer", type: "gauge", samples: epochs },
    { name: "brine_ring_owned_slots", help: `Slots of each ring (of ${ringSlots}) each node owns`, type: "gauge", samples: owned },
    { name: "brine_ring_drops_total", help: "Writes this master's owns_for gate refused, by data type and reason (Salt's drop_stats)", type: "counter", samples: drops },
  ];
}

/** Labels as Prometheus prints them, for a person (`{cmd="_auth"}`; empty for none). */
export function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
}

/** The upper bound of the bucket holding the q-th quantile of a histogram series (Prometheus' le), or +Inf. */
function quantileLe(le: readonly number[], s: HistogramSample, q: number): number {
  const want = q * s.count;
  for (let i = 0; i < le.length; i++) if (s.cumulative[i]! >= want) return le[i]!;
  return Infinity;
}

/**
 * The families for a person (`salt-run brine.stats`): one entry per metric name; a series without labels is
 * its value, others are keyed by their labels as Prometheus prints them; a histogram series is its count, sum
 * and the bucket bounds its median, 90th and 99th percentiles fall under.
 */
export function forPerson(fams: readonly Family[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const seconds = (v: number) => (Number.isFinite(v) ? v : "+Inf");
  for (const f of fams) {
    if (f.type === "histogram") {
      const by: Record<string, unknown> = {};
      for (const s of f.samples) {
        by[labelText(s.labels) || "all"] = {
          count: s.count,
          sum_seconds: Number(s.sum.toFixed(6)),
          p50_le_seconds: seconds(quantileLe(f.le, s, 0.5)),
          p90_le_seconds: seconds(quantileLe(f.le, s, 0.9)),
          p99_le_seconds: seconds(quantileLe(f.le, s, 0.99)),
        };
      }
      out[f.name] = by;
    } else if (f.samples.length === 1 && Object.keys(f.samples[0]!.labels).length === 0) {
      out[f.name] = f.samples[0]!.value;
    } else {
      const by: Record<string, number> = {};
      for (const s of f.samples) by[labelText(s.labels)] = s.value;
      out[f.name] = by;
    }
  }
  return out;
}
