#!/usr/bin/env node
// Runs every compiled test file under dist/test, each in a node process of its own, one file more at a
// time than the machine has cores (3 on CI's 2: the cluster and syndic tests spend much of their time waiting on
// timers and sockets, which a third file fills); BRINE_TEST_CONCURRENCY sets it.
// The files go longest first: test/durations.json holds each file's last recorded duration (ms); files it does not
// name go first (in name order), so that the run does not end on one long cluster test alone. (Handing all the
// files to one `node --test` does not keep any order: Node 20 sorts them by name. Its `run()` API, which keeps it,
// once stopped starting files in a CI run: a pool of our own processes is what keeps the order here.)
// A file runs in the test process itself (`node --test-force-exit … file`, not `node --test file`): under
// `node --test`, Node 20 runs the file in a child and --test-force-exit can end that child before the parent has read
// the last tests' results, so a passing file reported fewer tests than it ran (nodejs/node#64833; seen here once:
// outputters-golden reported 47 of its 49). Run in process, the reporter's lines are written before the exit.
// --test-force-exit ends the file when its last test ends: a test past its own declared timeout never runs its
// `finally`, and what it started (masters, sockets, timers) would keep the file alive.
// A file may run BRINE_TEST_FILE_TIMEOUT_S (900 s: the longest timeout a test declares, job-placement's; also each
// test's default timeout); past it the runner ends the file's process group (SIGTERM, then SIGKILL) and prints what
// it wrote, after a node diagnostic report of where it waits (hangReport). Each file's process is its own process
// group, killed whole (masters, minions, haproxy it started) when it ends, when it outlives its limit, or when the
// runner is interrupted (SIGINT, SIGTERM); such a file counts as failed. A file's output is printed whole
// when it ends; a summary of every file closes the run, naming the failed ones. `--record` merges this run's file
// durations into test/durations.json.
//   node scripts/run-tests.mjs [--record] [substring of a test path ...]  (a file runs when its path has any of them)
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";

const DURATIONS = "test/durations.json";
/** how long one file may run, s (the runner ends it past that; also each test's default timeout) */
const fileTimeoutS = process.env.BRINE_TEST_FILE_TIMEOUT_S ? Number(process.env.BRINE_TEST_FILE_TIMEOUT_S) : 900;
/** after SIGTERM, how long a killed file's processes get before SIGKILL, ms */
const killGraceMs = 10_000;
const concurrency = process.env.BRINE_TEST_CONCURRENCY ? Number(process.env.BRINE_TEST_CONCURRENCY) : availableParallelism() + 1;
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`BRINE_TEST_CONCURRENCY must be a whole number of test files at a time, 1 or more: ${process.env.BRINE_TEST_CONCURRENCY}`);
  process.exit(2);
}
if (!Number.isFinite(fileTimeoutS) || fileTimeoutS <= 0) {
  console.error(`BRINE_TEST_FILE_TIMEOUT_S must be a number of seconds over 0: ${process.env.BRINE_TEST_FILE_TIMEOUT_S}`);
  process.exit(2);
}

function collect(dir, out) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) collect(p, out);
    else if (name.endsWith(".test.js")) out.push(p);
  }
  return out;
}

const args = process.argv.slice(2);
const record = args.includes("--record");
const filters = args.filter((a) => a !== "--record");
/** test/x.test.ts for dist/test/x.test.js */
const sourceOf = (f) => f.replace(/^dist[\\/]/, "").replace(/\.js$/, ".ts").split("\\").join("/");
// a compiled test whose source was deleted or renamed stays in dist/ until it is cleaned: run only those
// with a source, so a stale copy can neither fail nor skip the run
const known = existsSync(DURATIONS) ? JSON.parse(readFileSync(DURATIONS, "utf8")) : {};
const files = collect("dist/test", [])
  .filter((f) => existsSync(sourceOf(f)) && (filters.length === 0 || filters.some((x) => f.includes(x))))
  .sort()
  .sort((a, b) => {
    const [da, db] = [known[sourceOf(a)] ?? Infinity, known[sourceOf(b)] ?? Infinity];
    return da === db ? 0 : db > da ? 1 : -1;
  });
if (files.length === 0) {
  console.error(`no test files found under dist/test${filters.length ? ` matching ${filters.join(", ")}` : ""}`);
  process.exit(1);
}

/** The spec reporter's closing counts of one file's run (`ℹ tests 12` …), undefined where a line is missing. */
function countsOf(text) {
  const at = (name) => {
    const m = [...text.matchAll(new RegExp(`^ℹ ${name} (\\d+)$`, "gm"))].pop();
    return m ? Number(m[1]) : undefined;
  };
  return { tests: at("tests"), pass: at("pass"), fail: at("fail"), cancelled: at("cancelled"), skipped: at("skipped"), todo: at("todo") };
}

const running = new Map(); // pid → child

/**
 * CPU time of the runner's reaped children and their waited descendants, ms (/proc/self/stat cutime + cstime):
 * read as each file's process is reaped, the growth is that file's CPU (the masters, minions and tools it
 * started and waited for included; what its group kill ends afterwards is not). Two files reaped in one turn of the
 * event loop share one reading: the first gets both, the second none (a summary figure, not a measurement). Where
 * /proc is absent, undefined.
 */
const ticksMs = 1000 / 100; // USER_HZ, 100 on Linux
function childrenCpuMs() {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // fields from the 3rd (state) on
    return (Number(fields[13]) + Number(fields[14])) * ticksMs; // cutime, cstime: the 16th and 17th
  } catch {
    return undefined;
  }
}
let lastChildrenCpuMs = childrenCpuMs();
const results = [];
const started = performance.now();
let interrupted = false;

/**
 * A file that runs past its limit usually waits on something that never comes (a server that does not close, a
 * thread that does not end). Before it is killed, node writes a diagnostic report on REPORT_SIGNAL (the test
 * process runs with --report-on-signal): the main thread's and each worker thread's JavaScript stack and the
 * libuv handles still open. hangReport prints what of it says where the file waits.
 */
const REPORT_SIGNAL = "SIGUSR2";
/** how long a report may take to appear, ms */
const reportWaitMs = 5_000;
const reportDir = mkdtempSync(join(tmpdir(), "brine-test-reports-"));
process.on("exit", () => rmSync(reportDir, { recursive: true, force: true }));

async function hangReport(pid) {
  try {
    process.kill(pid, REPORT_SIGNAL);
  } catch {
    return "\n# hang report: the test process had ended\n";
  }
  const mine = () => readdirSync(reportDir).find((n) => n.includes(`.${pid}.`) && n.endsWith(".json"));
  for (let waited = 0; waited < reportWaitMs && !mine(); waited += 100) await new Promise((r) => setTimeout(r, 100));
  // the report is written in one go but may still be landing: read it until it parses
  for (let tries = 0; tries < 20; tries++) {
    const name = mine();
    if (name) {
      try {
        return summarizeReport(JSON.parse(readFileSync(join(reportDir, name), "utf8")));
      } catch {
        // not whole yet
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return `\n# hang report: none written within ${reportWaitMs / 1000} s\n`;
}

/**
 * Per thread (the main thread, then each worker): its JavaScript stack (none when it is idle in its event loop, as
 * a thread waiting on a promise is) and its active libuv handles (the servers, sockets, timers and workers that
 * keep it alive), from a node diagnostic report.
 */
function summarizeReport(report) {
  const lines = ["", "# hang report (node diagnostic report, taken when the file ran past its limit)"];
  const thread = (r, name) => {
    const js = r?.javascriptStack;
    const frames = (js?.stack ?? []).filter((f) => f.trim() !== "Unavailable.");
    lines.push(`## ${name}: ${frames.length ? js.message || "JavaScript stack" : "no JavaScript running (idle in its event loop)"}`);
    for (const f of frames.slice(0, 15)) lines.push(`   ${f.trim()}`);
    // the referenced ones keep the thread alive; node's own unreferenced ones are only counted
    const active = (r?.libuv ?? []).filter((h) => h.is_active);
    const kept = active.filter((h) => h.is_referenced);
    lines.push(`   active libuv handles: ${kept.length} referenced (listed), ${active.length - kept.length} unreferenced`);
    for (const h of kept.slice(0, 40)) {
      const where = h.localEndpoint || h.remoteEndpoint ? ` ${JSON.stringify(h.localEndpoint ?? null)} -> ${JSON.stringify(h.remoteEndpoint ?? null)}` : h.filename ? ` ${h.filename}` : "";
      lines.push(`   - ${h.type}${where}`);
    }
  };
  thread(report, "main thread");
  (report.workers ?? []).forEach((w, i) => thread(w, `worker ${i + 1}${w?.header?.threadId !== undefined ? ` (thread ${w.header.threadId})` : ""}`));
  return lines.join("\n") + "\n";
}

function killGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
  } catch {
    // the group has ended already
  }
}

/** Whether any process of the group led by `pid` is left. */
function groupLeft(pid) {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** the ends of file groups still under way (endGroup), waited for before the runner exits */
const ending = new Set();

/**
 * Ends what a file left in its process group once its process has closed: SIGTERM, then SIGKILL after
 * killGraceMs if any is left. SIGTERM first so that a test process still ending runs its exit hooks (the
 * real-salt harness's daemons run in sessions of their own, out of the group's reach: the test process's hook,
 * tools/local-cluster.ts onThisProcessEnd, stops them), which an immediate SIGKILL of the group would cut short.
 */
function endGroup(pid) {
  if (!groupLeft(pid)) return;
  const done = (async () => {
    try {
      process.kill(-pid, "SIGTERM");
    } catch {
      return;
    }
    for (let waited = 0; waited < killGraceMs && groupLeft(pid); waited += 100) await new Promise((r) => setTimeout(r, 100));
    if (groupLeft(pid)) process.kill(-pid, "SIGKILL");
  })().catch(() => undefined);
  ending.add(done);
  void done.then(() => ending.delete(done));
}

function runFile(file) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    // in process (see the header): --test-timeout is each test's default timeout here, the file's limit is the watchdog
    // a file past its limit is asked for a diagnostic report first (hangReport): where its threads wait, what keeps it alive
    const args = ["--report-on-signal", `--report-signal=${REPORT_SIGNAL}`, `--report-directory=${reportDir}`, "--test-force-exit", `--test-timeout=${fileTimeoutS * 1000}`, "--test-reporter=spec", "--test-reporter-destination=stdout", file];
    const child = spawn(process.execPath, args, {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    running.set(child.pid, child);
    const chunks = [];
    child.stdout.on("data", (b) => chunks.push(b));
    child.stderr.on("data", (b) => chunks.push(b));
    let timedOut = false;
    let graceTimer;
    const watchdog = setTimeout(async () => {
      timedOut = true;
      chunks.push(Buffer.from(await hangReport(child.pid)));
      // it may have ended while the report was taken: nothing left to end then (and no grace timer left behind)
      if (child.exitCode !== null || child.signalCode !== null) return;
      killGroup(child, "SIGTERM");
      graceTimer = setTimeout(() => killGroup(child, "SIGKILL"), killGraceMs);
    }, fileTimeoutS * 1000);
    let cpuMs;
    child.on("exit", () => {
      const now = childrenCpuMs();
      if (now !== undefined && lastChildrenCpuMs !== undefined) cpuMs = now - lastChildrenCpuMs;
      lastChildrenCpuMs = now;
    });
    child.on("close", (code, signal) => {
      clearTimeout(watchdog);
      clearTimeout(graceTimer);
      running.delete(child.pid);
      // whatever the file left behind in its group (a haproxy, a master) goes with it
      endGroup(child.pid);
      const ms = performance.now() - t0;
      const out = Buffer.concat(chunks).toString("utf8");
      const counts = countsOf(out);
      const why = timedOut
        ? `ran past its ${fileTimeoutS} s and was killed`
        : interrupted
          ? "interrupted"
          : code !== 0
            ? `exited ${code ?? signal}`
            : counts.tests === undefined
              ? "printed no counts"
              : undefined;
      results.push({ file, ms, cpuMs, counts, failed: why !== undefined || (counts.fail ?? 0) > 0 || (counts.cancelled ?? 0) > 0, why });
      const cpu = cpuMs === undefined ? "" : ` (CPU ${(cpuMs / 1000).toFixed(1)} s)`;
      process.stdout.write(`\n# ${sourceOf(file)}: ${(ms / 1000).toFixed(1)} s${cpu}${why ? `, ${why}` : ""}\n${out}`);
      resolve();
    });
  });
}

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    interrupted = true;
    for (const child of running.values()) killGroup(child, "SIGTERM");
    // a backstop: a test process that does not end on SIGTERM is killed, and the runner ends
    setTimeout(() => {
      for (const child of running.values()) killGroup(child, "SIGKILL");
      process.exit(130);
    }, 2 * killGraceMs).unref();
  });
}

let next = 0;
await Promise.all(
  Array.from({ length: Math.min(concurrency, files.length) }, async () => {
    while (!interrupted && next < files.length) await runFile(files[next++]);
  }),
);

const sum = (k) => results.reduce((a, r) => a + (r.counts[k] ?? 0), 0);
const failed = results.filter((r) => r.failed);
const notRun = files.length - results.length;
console.log(`\nℹ files ${files.length} (${concurrency} at a time, longest first)`);
for (const k of ["tests", "pass", "fail", "cancelled", "skipped", "todo"]) console.log(`ℹ ${k} ${sum(k)}`);
console.log(`ℹ duration_ms ${Math.round(performance.now() - started)}`);
const withCpu = results.filter((r) => r.cpuMs !== undefined);
if (withCpu.length > 1) {
  // where the run's CPU went (on CI's two cores the suite's wall time is its CPU time over ~2)
  const total = withCpu.reduce((a, r) => a + r.cpuMs, 0);
  console.log(`ℹ cpu_ms ${Math.round(total)} (the files' processes); the most:`);
  for (const r of [...withCpu].sort((a, b) => b.cpuMs - a.cpuMs).slice(0, 10)) console.log(`ℹ   ${(r.cpuMs / 1000).toFixed(1)} s CPU, ${(r.ms / 1000).toFixed(1)} s wall: ${sourceOf(r.file)}`);
}
if (notRun) console.log(`✖ ${notRun} file(s) not run (interrupted)`);
if (failed.length) {
  console.log(`\n✖ failed files (${failed.length}), each printed above:`);
  for (const r of failed) console.log(`✖ ${sourceOf(r.file)}${r.why ? `: ${r.why}` : ""}${r.counts.fail ? ` (${r.counts.fail} failed)` : ""}${r.counts.cancelled ? ` (${r.counts.cancelled} cancelled: timed out)` : ""}`);
}
if (record) {
  const merged = { ...known };
  for (const r of results) if (!r.why) merged[sourceOf(r.file)] = Math.round(r.ms);
  const sorted = Object.fromEntries(Object.keys(merged).filter((f) => existsSync(f)).sort().map((f) => [f, merged[f]]));
  writeFileSync(DURATIONS, JSON.stringify(sorted, null, 1) + "\n");
  console.log(`${DURATIONS}: ${results.filter((r) => !r.why).length} files recorded`);
}
await Promise.all(ending);
process.exit(failed.length || notRun || interrupted ? 1 : 0);
