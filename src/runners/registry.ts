/** Every runner brine serves, by Salt name. */
import type { RunnerFn } from "./context.js";
import { clusterRunners } from "./cluster.js";
import { jobsRunners } from "./jobs.js";
import { manageRunners } from "./manage.js";
import { stateRunners } from "./state.js";
import { reactorRunners } from "./reactor.js";
import { testRunners } from "./test.js";

export const RUNNERS: Record<string, RunnerFn> = { ...jobsRunners, ...manageRunners, ...stateRunners, ...clusterRunners, ...reactorRunners, ...testRunners };
