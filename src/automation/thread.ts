/**
 * The automation thread: the reactor and the master schedule, off the main thread and off the request lanes.
 *
 * Reactor: bus frames the main thread selected (host.ts) are decoded here; an event fired by a reaction's own
 * runner or wheel call (`user: Reactor`) is skipped, as in Salt (no reaction loops); clustered, only the master
 * owning the event (owner.ts) reacts. Each event is one task of a bounded queue (reactor_worker_threads tasks at
 * once, reactor_worker_hwm waiting, past that dropped and counted): its SLS files are rendered with `tag` and
 * `data`, compiled (reactor.ts) and each reaction sent to the master as a client would send it: `local` as a
 * clear `publish` with the root key (src/lib/client/local-client.ts), `runner`/`wheel` as clear `runner`/`wheel`
 * requests with the root key and user `Reactor`; so the request workers authorize, audit and record them as
 * any other. A render error is logged and that event reacts with nothing; the thread goes on.
 *
 * Schedule: one timer for every job (armed for the earliest next fire, at most `scheduleWakeMsMax` away), fires
 * as schedule.ts decides; clustered, the owner of `schedule/<name>` among live masters runs each fire. A runner
 * job is a clear `runner` request (root key, the master's user): its runner thread fires `salt/run/<jid>/new`
 * and `/ret` and stores the job in the job cache like every runner call; a wheel job is a clear `wheel` request,
 * stored here. After a run, `__schedule_return` is fired as Salt's master schedule fires it (unless
 * `return_job: False`).
 */
import { parentPort } from "node:worker_threads";
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { getLogger } from "../shared/log.js";
import { LocalClient, clientSocketsSettled, closeClientSockets } from "../lib/client/local-client.js";
import { decodeWire, isMap } from "../shared/protocol/msgpack.js";
import { eventOfFrame, type BusEvent } from "../shared/event-frame.js";
import { JinjaEnv } from "../lib/render/jinja.js";
import { renderPipe } from "../lib/render/pipe.js";
import { loadYaml } from "../lib/render/yaml.js";
import { makeSaltFuncs } from "../lib/render/salt-funcs.js";
import { RingReader } from "../shared/sab-ring/reader.js";
import { openStore, type Store } from "../lib/store/lmdb-env.js";
import { JobCache } from "../lib/store/job-cache.js";
import { storeMasterJob } from "../runners/job-record.js";
import { automationDrainMsMax, type AutomationInit, type AutomationRequest, type FromAutomation, type ToAutomation } from "./messages.js";
import { checkReactorMap, readAutomationOptions } from "./options.js";
import { compileReactions, reactionCall, ReactorMap, unsupportedIn, type Reaction } from "./reactor.js";
import { BoundedQueue } from "./queue.js";
import { expandSlsRef } from "./sls-files.js";
import { parseJob, Schedule, type ScheduleJob } from "./schedule.js";
import { ownerOf, type OwnerSources } from "./owner.js";
import { threadInit } from "../shared/thread-kit.js";
import { portError } from "../shared/port-calls.js";

const init = threadInit<AutomationInit>("automation");
const log = getLogger("brine.reactor");
const slog = getLogger("brine.schedule");
const cfg = init.cfg;
const opts = readAutomationOptions(cfg);
const post = (m: FromAutomation) => parentPort!.postMessage(m);

/** The schedule timer never sleeps longer than this (clock changes, map refresh), ms. */
export const scheduleWakeMsMax = 60_000;
/** The user reactions' runner and wheel calls run as; their events are not reacted to (Salt's event_user). */
export const REACTOR_USER = "Reactor";
/** Dropped events logged one by one; after that every 1000th. */
const dropLogsMax = 100;
/** Runner returns seen before their request's reply, kept to match (entries). */
const earlyRetsMax = 256;

const client = new LocalClient(cfg);
const cluster: OwnerSources | undefined = init.cluster
  ? { self: init.cluster.nodeId, ring: new RingReader(init.cluster.ringBuffer), ...(init.cluster.health ? { health: init.cluster.health } : {}) }
  : undefined;
let store: Store | undefined;
let jobCache: JobCache | undefined;
// with jobs routed to a ring, the wheel jobs stored here are handed off to their owners too (job-cache.ts)
const jobs = () => (jobCache ??= new JobCache((store = openStore(cfg)), cluster ? () => cluster.ring.route("jobs") !== null : undefined));

const expandSls = (ref: string) => expandSlsRef(ref, (cfg.file_roots as Record<string, string[]> | undefined)?.base ?? []);

// --- reactor map -------------------------------------------------------------------------------------------

let map = new ReactorMap([]);
let mapLoadedAt = 0;
const hasSchedule = Object.keys(opts.schedule).length > 0;

function loadMap(): void {
  if (typeof opts.reactor.map !== "string") {
    if (mapLoadedAt === 0) map = new ReactorMap(opts.reactor.map.map((e) => ({ ...e })));
  } else {
    try {
      map = new ReactorMap(checkReactorMap(loadYaml(readFileSync(opts.reactor.map, "utf8")), opts.reactor.map));
    } catch (e) {
      log.error(`Failed to read reactor map "${opts.reactor.map}": ${(e as Error).message}`);
    }
  }
  mapLoadedAt = Date.now();
  publishGlobs();
}

function publishGlobs(): void {
  post({ k: "globs", globs: [...map.globs(), ...(hasSchedule ? ["salt/run/*/ret"] : [])] });
}

/** Template lookups by absolute path (the reactor file itself, its includes and imports). */
const jinja = new JinjaEnv(
  (name) => {
    const f = path.resolve("/", name);
    try {
      const st = statSync(f);
      return { path: f, sig: `${st.mtimeMs}:${st.size}`, read: () => readFileSync(f, "utf8") };
    } catch {
      return null;
    }
  },
  { trimBlocks: cfg.jinja_trim_blocks === true, lstripBlocks: cfg.jinja_lstrip_blocks === true },
);

function render(file: string, ev: BusEvent): unknown {
  const context: Record<string, unknown> = {
    tag: ev.tag,
    data: ev.data,
    opts: cfg,
    grains: {},
    pillar: {},
    saltenv: "base",
    sls: file,
    salt: makeSaltFuncs({ id: cfg.id, grains: {}, pillar: {}, opts: cfg as unknown as Record<string, unknown> }),
  };
  return renderPipe({ text: readFileSync(file, "utf8"), file, name: file, defaultPipe: typeof cfg.renderer === "string" ? cfg.renderer : "jinja|yaml", jinja, context });
}

/** Salt's Reactor.reactions: every selected file rendered and merged, compiled into ordered reactions. */
export function reactionsFor(ev: BusEvent, files: string[]): Reaction[] {
  const high: Record<string, { sls: string; body: unknown }> = {};
  for (const ref of files) {
    const paths = expandSls(ref);
    if (paths.length === 0) log.error(`Can not render SLS ${ref} for tag ${ev.tag}. File missing or not found.`);
    for (const f of paths) {
      try {
        const res = render(f, ev);
        if (res === null || res === undefined || (isMap(res) && Object.keys(res).length === 0)) continue;
        if (!isMap(res)) throw new Error("the rendered reactor SLS is not a map of reaction ids");
        for (const [id, body] of Object.entries(res)) high[id] = { sls: f, body };
      } catch (e) {
        log.error(`Failed to render "${f}" for tag ${ev.tag}: ${(e as Error).message}`);
      }
    }
  }
  if (Object.keys(high).length === 0) return [];
  const { reactions, errors } = compileReactions(high);
  if (errors.length) {
    log.error(`Unable to render reactions for event ${ev.tag} due to errors (${errors.join("; ")}) in one or more of the sls files (${files.join(", ")})`);
    return [];
  }
  return reactions;
}

function replyLoad(v: unknown): unknown {
  return isMap(v) && isMap(v.load) && Object.keys(v).every((k) => k === "load" || k === "enc") ? v.load : v;
}

async function clearCall(cmd: "runner" | "wheel", fun: string, arg: unknown[], kwarg: Record<string, unknown>, user: string): Promise<Record<string, unknown>> {
  const r = replyLoad(await client.clearRequest({ cmd, fun, arg, kwarg, key: client.rootKey(), user }));
  if (!isMap(r)) throw new Error(`unexpected reply ${JSON.stringify(r)}`);
  if (r.error !== undefined) throw new Error(isMap(r.error) ? `${String(r.error.name)}: ${String(r.error.message)}` : String(r.error));
  return r as Record<string, unknown>;
}

async function runReaction(r: Reaction): Promise<void> {
  const call = reactionCall(r);
  try {
    switch (call.kind) {
      case "unsupported":
        log.warning(call.why);
        return;
      case "local": {
        const rep = await client.pub({ tgt: call.tgt, tgtType: call.tgtType, fun: call.fun, arg: call.arg, ret: call.ret, user: cfg.user });
        if (rep.error !== undefined) log.error(`Reactor '${r.id}' failed to execute local '${r.fun}': ${JSON.stringify(rep.error)}`);
        else log.info(`Reactor '${r.id}': local '${r.fun}' published as ${rep.jid} to ${(rep.minions ?? []).length} minion(s)`);
        return;
      }
      default: {
        const rep = await clearCall(call.kind, call.fun, call.arg, call.kwarg, REACTOR_USER);
        log.info(`Reactor '${r.id}': ${call.kind} '${r.fun}' started as ${String(rep.jid ?? (isMap(rep.data) ? rep.data.jid : ""))}`);
      }
    }
  } catch (e) {
    log.error(`Reactor '${r.id}' failed to execute ${r.state} '${r.fun}': ${(e as Error).message}`);
  }
}

const queue = new BoundedQueue<BusEvent>(
  opts.reactor.workerThreads,
  opts.reactor.workerHwm,
  async (ev) => {
    const files = map.filesFor(ev.tag);
    for (const r of reactionsFor(ev, files)) await runReaction(r);
  },
  (ev, n) => (n <= dropLogsMax || n % 1000 === 0) && log.error(`Reactor queue is full (reactor_worker_hwm ${opts.reactor.workerHwm}): event ${ev.tag} dropped (${n} dropped since start). Consider tuning reactor_worker_threads and/or reactor_worker_hwm`),
);

/** events the main thread let through (a tag no glob names never arrives here) */
let received = 0;

let stopping = false;

function onEvent(ev: BusEvent): void {
  if (stopping) return;
  received++;
  const run = /^salt\/run\/(\d{20})\/ret$/.exec(ev.tag);
  if (run) scheduledReturn(run[1]!, ev.data);
  const data = isMap(ev.data) ? ev.data : {};
  if (data.user === REACTOR_USER) return;
  if (map.filesFor(ev.tag).length === 0) return;
  if (cluster) {
    const key = `${ev.tag}\0${String(data._stamp ?? "")}`;
    if (ownerOf(key, cluster) !== cluster.self) return;
  }
  queue.push(ev);
}

/** At start: say which reactions brine cannot run (caller.*), naming the file and the reaction. */
function warnUnsupported(): void {
  for (const e of map.list()) {
    for (const ref of Object.values(e)[0]!) {
      for (const f of expandSls(ref)) {
        let text = "";
        try {
          text = readFileSync(f, "utf8");
        } catch {
          continue;
        }
        for (const name of unsupportedIn(text)) log.warning(`reactor ${f}: '${name}' is a caller reaction, which brine does not support (no minion runs on the master); it will be skipped`);
      }
    }
  }
}

// --- schedule ----------------------------------------------------------------------------------------------

const schedJobs: ScheduleJob[] = Object.entries(opts.schedule).map(([name, raw]) => parseJob(name, raw, (cfg.schedule as Record<string, unknown> | undefined)?.splay));
const schedule = new Schedule(schedJobs, opts.scheduleEnabled, Date.now(), Math.random, (cfg.loop_interval ?? 60) * 1000);
/** scheduled runner jobs in flight: jid → job */
const runningJids = new Map<string, ScheduleJob>();
const earlyRets = new Map<string, unknown>();
let timer: NodeJS.Timeout | undefined;

function scheduleReturnEvent(job: ScheduleJob, ret: Record<string, unknown>): void {
  if (job.returnJob === false) return;
  const fun_args = [...job.args, ...(Object.keys(job.kwargs).length ? [job.kwargs] : [])];
  post({
    k: "fire",
    tag: "__schedule_return",
    data: { cmd: "_return", id: cfg.id, fun: job.kind === "wheel" ? `wheel.${job.fun}` : job.fun, fun_args, schedule: job.name, jid: job.returnJob === "nocache" ? "nocache" : "req", pid: process.pid, return: ret.return, success: ret.success === true, retcode: ret.success === true ? 0 : 1, brine_jid: ret.jid },
  });
}

function scheduledReturn(jid: string, data: unknown): void {
  const job = runningJids.get(jid);
  if (!job) {
    if (hasSchedule) {
      earlyRets.set(jid, data);
      if (earlyRets.size > earlyRetsMax) earlyRets.delete(earlyRets.keys().next().value!);
    }
    return;
  }
  runningJids.delete(jid);
  schedule.finished(job.name);
  slog.info(`Scheduled job ${job.name} (${job.fun}, jid ${jid}) finished`);
  scheduleReturnEvent(job, { ...(isMap(data) ? data : {}), jid });
}

let firesInFlight = 0;

async function fire(job: ScheduleJob): Promise<void> {
  firesInFlight++;
  try {
    await fireJob(job);
  } finally {
    firesInFlight--;
  }
}

async function fireJob(job: ScheduleJob): Promise<void> {
  schedule.started(job.name);
  if (job.kind === "runner") {
    try {
      const rep = await clearCall("runner", job.fun, job.args, job.kwargs, cfg.user);
      const jid = String(rep.jid ?? "");
      slog.info(`Running scheduled job: ${job.name} (runner ${job.fun}) with jid ${jid}`);
      runningJids.set(jid, job);
      if (earlyRets.has(jid)) {
        const data = earlyRets.get(jid);
        earlyRets.delete(jid);
        scheduledReturn(jid, data);
      }
    } catch (e) {
      schedule.finished(job.name);
      slog.error(`Scheduled job ${job.name} (runner ${job.fun}) could not start: ${(e as Error).message}`);
    }
    return;
  }
  try {
    const rep = await clearCall("wheel", job.fun, job.args, job.kwargs, cfg.user);
    const data = isMap(rep.data) ? rep.data : {};
    const jid = String(data.jid ?? "");
    slog.info(`Ran scheduled job: ${job.name} (wheel ${job.fun}) with jid ${jid}`);
    if (/^\d{20}$/.test(jid)) await storeMasterJob(jobs(), cfg.id, { jid, fun: `wheel.${job.fun}`, fun_args: [...job.args, ...(Object.keys(job.kwargs).length ? [job.kwargs] : [])], user: cfg.user }, { return: data.return, success: data.success === true });
    scheduleReturnEvent(job, { ...data, jid });
  } catch (e) {
    slog.error(`Scheduled job ${job.name} (wheel ${job.fun}) failed: ${(e as Error).message}`);
  } finally {
    schedule.finished(job.name);
  }
}

function tick(): void {
  timer = undefined;
  if (stopping) return;
  const now = Date.now();
  if (typeof opts.reactor.map === "string" && now - mapLoadedAt >= opts.reactor.refreshIntervalS * 1000) loadMap();
  // clustered, a fire before the ring is published is skipped: every master would think itself alone
  const mine = (job: ScheduleJob) => !cluster || (cluster.ring.nodes().length > 0 && ownerOf(`schedule/${job.name}`, cluster) === cluster.self);
  for (const d of schedule.due(now, mine)) {
    if (d.run) void fire(d.job);
    else slog.debug(`Scheduled job ${d.job.name} skipped: ${d.reason}`);
  }
  arm();
}

function arm(): void {
  if (timer) clearTimeout(timer);
  const now = Date.now();
  let at = schedule.nextWake();
  if (typeof opts.reactor.map === "string") at = Math.min(at ?? Infinity, mapLoadedAt + opts.reactor.refreshIntervalS * 1000);
  if (at === null || at === Infinity) return;
  timer = setTimeout(tick, Math.max(0, Math.min(at - now, scheduleWakeMsMax)));
}

// --- control requests ----------------------------------------------------------------------------------------

function handle(req: AutomationRequest): unknown {
  switch (req.op) {
    case "reactor.list":
      return map.list();
    case "reactor.add": {
      const r = map.add(req.event, req.reactors);
      publishGlobs();
      return r;
    }
    case "reactor.delete": {
      const r = map.delete(req.event);
      publishGlobs();
      return r;
    }
    case "reactor.stats":
      return { received, queued: queue.length, running: queue.running, done: queue.done, dropped: queue.dropped, hwm: opts.reactor.workerHwm, worker_threads: opts.reactor.workerThreads };
    case "schedule.list":
      return schedule.list();
  }
}

parentPort!.on("message", (m: ToAutomation) => {
  if (m.k === "ev") {
    let ev: BusEvent | undefined;
    try {
      ev = eventOfFrame(decodeWire(Buffer.from(m.frame.buffer, m.frame.byteOffset, m.frame.byteLength), { bytesMax: 2 ** 30, depthMax: 200, elementsMax: 5e7 }));
    } catch (e) {
      log.warning(`undecodable bus frame: ${(e as Error).message}`);
    }
    if (ev) onEvent(ev);
  } else if (m.k === "req") {
    try {
      post({ k: "res", id: m.id, ret: handle(m.req) });
    } catch (e) {
      post({ k: "err", id: m.id, ...portError(e, "THREAD_CALL") });
    }
  } else if (m.k === "stop") {
    // no new work; what is in flight gets drainMs, then every request socket is closed before the
    // host ends the thread (a thread ended while a zeromq socket waits for its reply aborts the process)
    stopping = true;
    if (timer) clearTimeout(timer);
    const left = queue.clear();
    if (left) log.warning(`master stopping: ${left} queued event(s) will not react`);
    const drainMs = Math.min(Math.max(0, m.drainMs), automationDrainMsMax);
    const drainEnd = Date.now() + drainMs;
    const check = () => {
      const busy = queue.running + firesInFlight;
      if (busy > 0 && Date.now() < drainEnd) return void setTimeout(check, 20);
      const cut = closeClientSockets();
      if (busy > 0) log.warning(`master stopping: ${busy} reaction(s) or scheduled call(s) still running after ${drainMs} ms; ${cut} request(s) to the master cut short`);
      // a reaction cut short may still write its job record: the job cache stays open for it until the end
      // and libzmq must have let go of what the closed sockets still held before the thread may end (zmq-settle.ts)
      void Promise.allSettled([busy === 0 ? (store?.close() ?? Promise.resolve()) : Promise.resolve(), clientSocketsSettled()]).finally(() => post({ k: "stopped" }));
    };
    check();
  }
});

loadMap();
warnUnsupported();
if (schedJobs.length) slog.info(`master schedule: ${schedJobs.length} job(s) (${schedJobs.map((j) => j.name).join(", ")})`);
arm();
