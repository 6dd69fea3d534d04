/**
 * The pillar subsystem: a PillarCompiler per request-worker context, installed as
 * `ctx.compilePillar`, which `_pillar` calls (the reply goes out via send_private and the minion data
 * cache keeps grains + pillar). Loaded by src/workers/req-handler/subsystems.ts.
 */
import { isMap } from "../../shared/protocol/msgpack.js";
import { addSubsystem } from "./subsystems.js";
import { PillarCompiler } from "../../lib/pillar/compile.js";

export { PillarCompiler, type CompileRequest } from "../../lib/pillar/compile.js";
export { merge } from "../../lib/pillar/merge.js";

addSubsystem((ctx) => {
  const compiler = new PillarCompiler(ctx.cfg);
  ctx.compilePillar = (id, grains, load) =>
    compiler.compile({
      id,
      grains,
      saltenv: typeof load.saltenv === "string" ? load.saltenv : null,
      pillarenv: typeof load.pillarenv === "string" ? load.pillarenv : null,
      pillarOverride: isMap(load.pillar_override) ? (load.pillar_override as Record<string, unknown>) : {},
    });
});
