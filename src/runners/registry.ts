/** Every runner brine serves, by Salt name. */
import type { RunnerFn } from "./context.js";
import { clusterRunners } from "./cluster.js";
import { jobsRunners } from "./jobs.js";
import { manageRunners } from "./manage.js";
import { stateRunners } from "./state.js";
import { reactorRunners } from "./reactor.js";
import { testRunners } from "./test.js";
import { cacheRunners } from "./cache.js";
import { saltutilRunners } from "./custom.js";
import { fileserverRunners } from "./fileserver.js";
import { mineRunners } from "./mine.js";
import { pillarRunners } from "./pillar.js";
import { surveyRunners } from "./survey.js";
import { brineRunners } from "./brine.js";

export const RUNNERS: Record<string, RunnerFn> = { ...jobsRunners, ...manageRunners, ...stateRunners, ...clusterRunners, ...reactorRunners, ...testRunners };
Object.assign(RUNNERS, cacheRunners, mineRunners, pillarRunners, fileserverRunners, surveyRunners, saltutilRunners, brineRunners);
