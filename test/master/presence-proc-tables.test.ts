/**
 * Presence reads the kernel's connection tables (src/workers/req-handler/presence.ts): the established peers of
 * the publish port, from /proc/net/tcp and, only when the master may listen on IPv6, /proc/net/tcp6 (each read
 * walks the kernel's whole connection hash: milliseconds per publish on this box, tcp6 even when empty).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { peerAddresses, procTables } from "../../src/workers/req-handler/presence.js";

const HEAD = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
const tail = " 00000000:00000000 00:00000000 00000000  1000        0 12345 1 0000000000000000 20 4 30 10 -1\n";

function procDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-proc-net-"));
  // port 4505 = 0x1199: a listener, two established peers (10.0.0.5, 127.0.0.1), one in TIME_WAIT (06), one to port 4506
  writeFileSync(
    path.join(dir, "tcp"),
    HEAD +
      `   0: 00000000:1199 00000000:0000 0A${tail}` +
      `   1: 0100007F:1199 0500000A:C001 01${tail}` +
      `  12: 0100007F:1199 0100007F:C002 01${tail}` +
      `  13: 0100007F:1199 0700000A:C003 06${tail}` +
      `  14: 0100007F:119A 0800000A:C004 01${tail}` +
      // the minion's end of a connection to 4505: its local port is not 4505
      `  15: 0500000A:C001 0100007F:1199 01${tail}`,
  );
  // ::ffff:10.0.0.6, 2001:db8::9 and fe80::1:0:0:2 connected to 4505 over IPv6
  writeFileSync(
    path.join(dir, "tcp6"),
    HEAD +
      `   0: 00000000000000000000000000000000:1199 0000000000000000FFFF00000600000A:C005 01${tail}` +
      `   1: 00000000000000000000000000000000:1199 B80D0120000000000000000009000000:C006 01${tail}` +
      `   2: 00000000000000000000000000000000:1199 000080FE000000000000010002000000:C007 01${tail}`,
  );
  return dir;
}

test("the established peers of a port are read from tcp and tcp6 (IPv6 written as grains write it); listeners, other states, other ports and the far end are not peers", () => {
  const dir = procDir();
  try {
    assert.deepEqual([...peerAddresses(4505, dir)].sort(), ["10.0.0.5", "10.0.0.6", "127.0.0.1", "2001:db8::9", "fe80::1:0:0:2"]);
    assert.deepEqual([...peerAddresses(4506, dir)], ["10.0.0.8"]);
    assert.deepEqual([...peerAddresses(4505, dir, ["tcp"])].sort(), ["10.0.0.5", "127.0.0.1"]);
    assert.equal(peerAddresses(4507, dir).size, 0);
    assert.equal(peerAddresses(4505, path.join(dir, "absent")).size, 0, "no /proc: nobody is seen");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("tcp6 is read only when the master may listen on IPv6", () => {
  const table: [Record<string, unknown>, string[]][] = [
    [{ ipv6: false, interface: "0.0.0.0" }, ["tcp"]],
    [{ ipv6: false, interface: "127.0.0.1" }, ["tcp"]],
    [{ ipv6: true, interface: "0.0.0.0" }, ["tcp", "tcp6"]],
    [{ ipv6: false, interface: "::" }, ["tcp", "tcp6"]],
    [{ ipv6: false, interface: "master.example" }, ["tcp", "tcp6"]],
  ];
  for (const [cfg, want] of table) assert.deepEqual(procTables(cfg as never), want, JSON.stringify(cfg));
});
