/**
 * `reactor:` given as the path of a YAML file holding the map (Salt's other form), read again every
 * reactor_refresh_interval seconds, with SLS references as `salt://` paths (file_roots base) and globs.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { expandSlsRef } from "../../src/automation/sls-files.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import { startTestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";

test("salt:// references resolve in file_roots base, the first root holding them; a glob lists files sorted", () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-slsref-"));
  const [r1, r2] = [path.join(root, "r1"), path.join(root, "r2")];
  mkdirSync(path.join(r1, "reactor"), { recursive: true });
  mkdirSync(path.join(r2, "reactor"), { recursive: true });
  for (const f of ["b.sls", "a.sls", "c.txt"]) writeFileSync(path.join(r2, "reactor", f), "");
  writeFileSync(path.join(r1, "reactor", "only1.sls"), "");
  assert.deepEqual(expandSlsRef("salt://reactor/only1.sls", [r1, r2]), [path.join(r1, "reactor", "only1.sls")]);
  assert.deepEqual(expandSlsRef("salt://reactor/*.sls", [r1, r2]), [path.join(r1, "reactor", "only1.sls")], "the first root with a match wins");
  assert.deepEqual(expandSlsRef("salt://reactor/[ab].sls", [r1, r2]), [path.join(r2, "reactor", "a.sls"), path.join(r2, "reactor", "b.sls")]);
  assert.deepEqual(expandSlsRef(path.join(r2, "reactor", "*.sls"), []), [path.join(r2, "reactor", "a.sls"), path.join(r2, "reactor", "b.sls")]);
  assert.deepEqual(expandSlsRef("salt://reactor/missing.sls", [r1, r2]), []);
});

test("a reactor map file is read at start and again after reactor_refresh_interval", { timeout: 90_000 }, async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-reactmap-"));
  const srv = path.join(root, "srv", "salt");
  mkdirSync(path.join(srv, "reactor"), { recursive: true });
  writeFileSync(path.join(srv, "reactor", "echo.sls"), `echo:\n  local.test.echo:\n    - tgt: {{ data['id'] }}\n    - arg: ["{{ tag }}"]\n`);
  const mapFile = path.join(root, "reactor.yaml");
  writeFileSync(mapFile, `- 'first/*':\n  - salt://reactor/echo.sls\n`);
  const tm = await startTestMaster({ auto_accept: true, reactor: mapFile, reactor_refresh_interval: 1 } as never, root);
  const ec = new EventClient(tm.sockDir);
  await ec.connect();
  const events: BusEvent[] = [];
  ec.on((e) => events.push(e));
  const [k] = await testKeys(1);
  const m = fastMinion(tm, "map-1", k!);
  const echoed = (tag: string) => events.some((e) => /^salt\/job\/\d{20}\/new$/.test(e.tag) && e.data.fun === "test.echo" && e.data.arg?.[0] === tag);
  const wait = async (tag: string) => {
    for (let i = 0; i < 200 && !echoed(tag); i++) await new Promise((r) => setTimeout(r, 50));
    return echoed(tag);
  };
  try {
    await m.start();
    await m.fireEvent("first/a", {});
    assert.ok(await wait("first/a"), "the map file's glob reacts");
    writeFileSync(mapFile, `- 'second/*':\n  - salt://reactor/echo.sls\n`);
    await new Promise((r) => setTimeout(r, 2500));
    await m.fireEvent("second/b", {});
    assert.ok(await wait("second/b"), "the rewritten map is read again");
    await m.fireEvent("first/c", {});
    assert.equal(await wait("first/c"), false, "the old glob is gone");
  } finally {
    ec.close();
    await m.stop();
    await tm.stop();
  }
});
