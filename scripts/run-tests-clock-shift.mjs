#!/usr/bin/env node
// Runs the tests (scripts/run-tests.mjs, same filters) with every node process and thread living some days ahead
// (scripts/clock-shift.cjs through NODE_OPTIONS), once per shift: a test that fails here and passes in `npm test`
// depends on the date it runs, such as a job of a fixed day that keep_jobs hides once it is a day old.
//   node scripts/run-tests-clock-shift.mjs [--shift 3d,400d] [substring of a test path ...]
// Default shifts: 3d and 400d. Not part of `npm test`. What the shift does not move (Python minions, files'
// mtimes, OpenSSL's certificate dates) can fail a test for the shift's own sake: read a failure before fixing it.
import { spawnSync } from "node:child_process";

const args = process.argv.slice(2);
let shifts = ["3d", "400d"];
const i = args.indexOf("--shift");
if (i >= 0) {
  if (!args[i + 1]) {
    console.error("--shift needs a value: a comma-separated list such as 3d,400d");
    process.exit(2);
  }
  shifts = args[i + 1].split(",").map((s) => s.trim()).filter(Boolean);
  args.splice(i, 2);
}
const preload = new URL("./clock-shift.cjs", import.meta.url).pathname;
const runner = new URL("./run-tests.mjs", import.meta.url).pathname;
let worst = 0;
for (const shift of shifts) {
  console.log(`# clock shifted by ${shift}`);
  const res = spawnSync(process.execPath, [runner, ...args], {
    stdio: "inherit",
    env: {
      ...process.env,
      BRINE_CLOCK_SHIFT: shift,
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --require=${preload}`.trim(),
    },
  });
  const status = res.status ?? 1;
  console.log(`# clock shifted by ${shift}: ${status === 0 ? "passed" : `failed (exit ${status})`}`);
  worst = Math.max(worst, status);
}
process.exit(worst);
