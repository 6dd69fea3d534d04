/**
 * Optional subsystems a request worker installs into its context at start (fileserver, pillar, the
 * master-of-masters handlers of syndic-return.ts).
 * Each registers its AES commands or hooks; the request layer stays unaware of them.
 *
 * The built-in subsystem modules call `addSubsystem` when they load. They are imported dynamically on
 * the first install: a static import would evaluate them before this module's `subsystems` list exists
 * (they import `addSubsystem` from here, an import cycle).
 */
import type { MasterContext } from "./context.js";

export type Subsystem = (ctx: MasterContext) => void | Promise<void>;

const subsystems: Subsystem[] = [];
let builtins: Promise<unknown> | undefined;

export function addSubsystem(s: Subsystem): void {
  subsystems.push(s);
}

function loadBuiltins(): Promise<unknown> {
  builtins ??= Promise.all([import("./fileserver-subsystem.js"), import("./pillar-subsystem.js"), import("./syndic-return.js")]);
  return builtins;
}

export async function installSubsystems(ctx: MasterContext): Promise<void> {
  await loadBuiltins();
  for (const s of subsystems) await s(ctx);
}
