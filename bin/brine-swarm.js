#!/usr/bin/env node
import "../dist/tools/swarm/cli.js";
