#!/usr/bin/env node
import "../dist/src/cli/brine-swarm.js";
