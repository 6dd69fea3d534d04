/**
 * Memory figures read after full collections, for tests that measure what a structure keeps per minion: node's
 * `gc` is exposed here (V8's --expose-gc set at run time, the function taken from a fresh context), and each
 * reading collects twice first (the second pass takes what the first one's finalizers let go).
 */
import v8 from "node:v8";
import { runInNewContext } from "node:vm";

v8.setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** ArrayBuffer memory (Buffers' backing stores included) after two full collections, bytes. */
export function arrayBuffersAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().arrayBuffers;
}
