#!/usr/bin/env node
import "../dist/src/cli/salt-syndic.js";
