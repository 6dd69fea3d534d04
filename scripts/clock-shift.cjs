// A preload that moves this process's wall clock forward (or back) by a fixed offset: `Date.now()`, `new Date()`,
// `Date()` and `performance.timeOrigin` (brine's nowMs) read the real time plus the offset; monotonic clocks
// (performance.now, process.hrtime, timers) are left alone. Files' times move with it as node sees them: a stat
// (fs stat/lstat/fstat, sync, callback, promises, FileHandle) reads them plus the offset and a utimes sets them minus
// it, so a file written now is as old as node's clock says (what a suite run on that later day would see). Given
// through NODE_OPTIONS as `--require` (node runs it in every worker thread, those made from code with `eval: true`
// too, which an `--import` preload does not reach), it runs in every process node starts from there (test files,
// the CLIs and masters they spawn) and in every worker thread of those, so the whole suite lives N days ahead
// (scripts/run-tests-clock-shift.mjs). What it does not move: Python minions, native code's own clocks and stats
// (LMDB, libzmq, OpenSSL's certificate checks), anything outside node.
//   NODE_OPTIONS="--require=$PWD/scripts/clock-shift.cjs" BRINE_CLOCK_SHIFT=3d node …
// BRINE_CLOCK_SHIFT: a whole number followed by d (days), h (hours), s (seconds) or ms; negative moves back.
// A value it cannot read stops the process (a run that silently did not shift would prove nothing).
"use strict";
const fs = require("node:fs");
const { syncBuiltinESMExports } = require("node:module");

const spec = process.env.BRINE_CLOCK_SHIFT ?? "";
const m = /^(-?\d+)(d|h|s|ms)$/.exec(spec.trim());
if (!m) {
  process.stderr.write(`clock-shift: BRINE_CLOCK_SHIFT must be a whole number with a unit d, h, s or ms (e.g. 3d), not '${spec}'\n`);
  process.exit(2);
}
const UNIT_MS = { d: 86_400_000, h: 3_600_000, s: 1000, ms: 1 };
const offsetMs = Number(m[1]) * UNIT_MS[m[2]];

if (offsetMs !== 0) {
  const RealDate = Date;
  const realNow = RealDate.now.bind(RealDate);
  const shiftedNow = () => realNow() + offsetMs;
  RealDate.now = shiftedNow;
  globalThis.Date = new Proxy(RealDate, {
    // `new Date()` is now; with arguments it is the date they name, as ever
    construct(target, args, newTarget) {
      return Reflect.construct(target, args.length === 0 ? [shiftedNow()] : args, newTarget);
    },
    // `Date()` called as a function is the current time as text
    apply() {
      return new RealDate(shiftedNow()).toString();
    },
  });
  const origin = performance.timeOrigin + offsetMs;
  Object.defineProperty(performance, "timeOrigin", { value: origin, configurable: true, enumerable: true });
}

if (offsetMs !== 0) {
  const RealDate = Object.getPrototypeOf(new Date(0)).constructor;
  const TIMES = ["atime", "mtime", "ctime", "birthtime"];
  /** a Stats (or BigIntStats) with its four times moved by the offset, in place */
  const shifted = (st) => {
    if (st === null || typeof st !== "object" || !("mtimeMs" in st)) return st;
    const big = typeof st.mtimeMs === "bigint";
    for (const t of TIMES) {
      if (big) {
        st[`${t}Ms`] += BigInt(offsetMs);
        st[`${t}Ns`] += BigInt(offsetMs) * 1_000_000n;
      } else st[`${t}Ms`] += offsetMs;
      Object.defineProperty(st, t, { value: new RealDate(Number(st[`${t}Ms`])), writable: true, enumerable: true, configurable: true });
    }
    return st;
  };
  /** a time given to utimes (seconds, numeric text or a Date) as the real clock's seconds */
  const unshifted = (v) => {
    if (v instanceof RealDate) return (v.getTime() - offsetMs) / 1000;
    const n = typeof v === "string" ? Number(v) : v;
    return typeof n === "number" && Number.isFinite(n) ? n - offsetMs / 1000 : v;
  };
  const patch = (obj, name, wrap) => {
    if (typeof obj[name] === "function") obj[name] = wrap(obj[name]);
  };
  for (const name of ["statSync", "lstatSync", "fstatSync"]) patch(fs, name, (f) => (...a) => shifted(f.apply(fs, a)));
  for (const name of ["stat", "lstat", "fstat"]) {
    patch(fs, name, (f) => (...a) => {
      const cb = a.pop();
      return f.apply(fs, [...a, (err, st) => cb(err, err ? st : shifted(st))]);
    });
  }
  for (const name of ["stat", "lstat"]) patch(fs.promises, name, (f) => async (...a) => shifted(await f.apply(fs.promises, a)));
  for (const name of ["utimesSync", "futimesSync", "lutimesSync"]) patch(fs, name, (f) => (p, at, mt) => f.call(fs, p, unshifted(at), unshifted(mt)));
  for (const name of ["utimes", "futimes", "lutimes"]) patch(fs, name, (f) => (p, at, mt, cb) => f.call(fs, p, unshifted(at), unshifted(mt), cb));
  for (const name of ["utimes", "lutimes"]) patch(fs.promises, name, (f) => (p, at, mt) => f.call(fs.promises, p, unshifted(at), unshifted(mt)));
  // a FileHandle's own stat and utimes: its prototype is reachable from a handle only, so the first one opened patches it
  let handlesPatched = false;
  patch(fs.promises, "open", (f) => async (...a) => {
    const fh = await f.apply(fs.promises, a);
    if (!handlesPatched) {
      handlesPatched = true;
      const FileHandle = Object.getPrototypeOf(fh);
      patch(FileHandle, "stat", (g) => async function (...b) {
        return shifted(await g.apply(this, b));
      });
      patch(FileHandle, "utimes", (g) => function (at, mt) {
        return g.call(this, unshifted(at), unshifted(mt));
      });
    }
    return fh;
  });
  // `import { statSync } from "node:fs"` (and node:fs/promises) see the wrapped functions
  syncBuiltinESMExports();
}
