#!/usr/bin/env node
import "../dist/src/cli/salt-run.js";
