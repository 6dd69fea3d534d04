/**
 * Another process that holds an LMDB environment's write lock for a while: what a master's threads meet when
 * another writer of the same environment is busy (a slow disk, a bulk import). Resolves once the lock is held.
 */
import { spawn, type ChildProcess } from "node:child_process";

export function holdWriteLock(dir: string, ms: number): Promise<ChildProcess> {
  const code = `import { open } from "lmdb";
const root = open({ path: ${JSON.stringify(dir)}, maxDbs: 32 });
root.transactionSync(() => { process.stdout.write("locked\\n"); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${ms}); });
root.close();`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", code], { cwd: process.cwd(), stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    child.stdout!.on("data", (d) => String(d).includes("locked") && resolve(child));
    child.on("exit", (c) => reject(new Error(`lock holder exited ${c}`)));
  });
}
