/**
 * Optional subsystems a request worker installs into its context at start (fileserver, pillar).
 * Each registers its AES commands or hooks; the request layer stays unaware of them.
 */
import type { MasterContext } from "./context.js";

export type Subsystem = (ctx: MasterContext) => void | Promise<void>;

const subsystems: Subsystem[] = [];

export function addSubsystem(s: Subsystem): void {
  subsystems.push(s);
}

export async function installSubsystems(ctx: MasterContext): Promise<void> {
  for (const s of subsystems) await s(ctx);
}
