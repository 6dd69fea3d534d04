/**
 * libsodium for the peer channel, ready at import. The package's ESM entry point imports a file that its
 * `libsodium` dependency does not ship (libsodium-wrappers 0.7.16: `dist/modules-esm/libsodium.mjs` is
 * missing), so the CommonJS build is loaded through `createRequire`. The top-level await means every module
 * that imports this one can call sodium synchronously: the handshake and session code stays plain functions.
 */
import { createRequire } from "node:module";
import type sodiumTypes from "libsodium-wrappers";

const require = createRequire(import.meta.url);
const lib = require("libsodium-wrappers") as typeof sodiumTypes;
await lib.ready;

export const sodium: typeof sodiumTypes = lib;
