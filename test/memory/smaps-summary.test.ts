/**
 * brine.memory's breakdown of a process's resident memory by owner, from /proc/<pid>/smaps text: LMDB
 * environments by directory, the brk heap, glibc's other malloc arenas, anonymous mappings, stacks, file-backed mappings.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { categoryOf, summarizeSmaps } from "../../src/shared/smaps.js";

const sample = `55cc402b4000-55cc402b8000 r--p 00000000 fe:00 260368                     /usr/bin/node
Size:                 16 kB
Rss:                  12 kB
Pss:                  12 kB
VmFlags: rd mr mw me sd
55cc40400000-55cc40500000 rw-p 00000000 00:00 0                          [heap]
Rss:                 900 kB
7f0000001000-7f0004001000 rw-p 00000000 00:00 0 
Size:              65536 kB
Rss:                3000 kB
7f2000000000-7f2000800000 rw-p 00000000 00:00 0 
Rss:                5000 kB
7f2000800000-7f2004000000 ---p 00000000 00:00 0 
Rss:                   0 kB
7f3000000000-7f3000800000 rw-p 00000000 00:00 0 
Rss:                 700 kB
7f3000800000-7f3001000000 ---p 00000000 00:00 0 
Rss:                   0 kB
7f1000000000-7f1200000000 r--s 00000000 fe:00 42                         /var/cache/salt/master/brine-lmdb/data.mdb
Rss:                 640 kB
7f1300000000-7f1300001000 r--s 00000000 fe:00 43                         /var/lib/brine/raft lmdb/data.mdb
Rss:                   4 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Rss:                  36 kB
7ffd10000000-7ffd10002000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   8 kB
7f0004001000-7f0008001000 rw-p 00000000 00:00 0 
Rss:                 100 kB
`;

test("resident kB are summed per owner: each LMDB environment by directory, brk heap, malloc arenas, anonymous, stack, files", () => {
  const s = summarizeSmaps(sample);
  assert.deepEqual(s.residentKb, {
    files: 12,
    "brk heap": 900,
    // 7f2000000000: 8 MiB read-write and its PROT_NONE tail up to 64 MiB on a 64 MiB boundary (a glibc arena heap);
    // 7f3000000000 is aligned too but its reservation ends short of 64 MiB: not an arena
    "malloc arenas": 5000,
    anonymous: 3100 + 700,
    "lmdb /var/cache/salt/master/brine-lmdb": 640,
    "lmdb /var/lib/brine/raft lmdb": 4,
    stack: 36,
    kernel: 8,
  });
  assert.equal(s.totalKb, 12 + 900 + 5000 + 3100 + 700 + 640 + 4 + 36 + 8);
});

test("a mapping's category comes from its path alone", () => {
  assert.equal(categoryOf(""), "anonymous");
  assert.equal(categoryOf("[heap]"), "brk heap");
  assert.equal(categoryOf("[stack:1234]"), "stack");
  assert.equal(categoryOf("/x/data.mdb (deleted)"), "lmdb /x");
  assert.equal(categoryOf("/x/lock.mdb"), "files");
});

test("this process's own smaps add up to its VmRSS (within what changes between the two reads)", () => {
  const s = summarizeSmaps(readFileSync("/proc/self/smaps", "utf8"));
  const rss = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync("/proc/self/status", "utf8"))![1]);
  assert.ok(s.totalKb > 0);
  assert.ok(Math.abs(s.totalKb - rss) < rss * 0.1, `smaps ${s.totalKb} kB against VmRSS ${rss} kB`);
});
