#!/usr/bin/env node
// Writes docs/CONFIG.md from the configuration schema (src/shared/config/schema.ts, compiled to dist/).
// Run through `npm run config:docs`, which builds first; test/config/config-docs.test.ts fails when the file is stale.
import { writeFileSync } from "node:fs";
import { renderConfigDocs } from "../dist/src/shared/config/docs.js";

writeFileSync(new URL("../docs/CONFIG.md", import.meta.url), renderConfigDocs());
console.log("docs/CONFIG.md written");
