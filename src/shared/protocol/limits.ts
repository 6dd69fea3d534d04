/**
 * Wire limits. Every frame is checked against these before and while it is decoded, so a hostile
 * frame costs at most O(frameBytesMax) work and never more memory than its own size allows.
 */

/** Largest request frame accepted on the ROUTER socket (a big `_return` or a file chunk fits). */
export const frameBytesMax = 64 * 1024 * 1024;
/**
 * Largest clear (unauthenticated) request: `_auth` (~1 KiB with a 4096-bit key) or a CLI/API command. A larger
 * frame must be a flat AES envelope (scalars only: the ciphertext is one bin/str), which decodes without
 * walking any container; anything else over this size is refused before its containers are read.
 */
export const clearFrameBytesMax = 64 * 1024;
/** How a frame over clearFrameBytesMax is decoded: the envelope map and its scalar values, nothing nested. */
export const bigEnvelopeDepthMax = 1;
/**
 * Elements a frame between clearFrameBytesMax and brine_clear_request_bytes_max may hold (a large CLI
 * publish is a few strings of arguments; a flood of small elements is what costs decode time).
 */
export const largeClearElementsMax = 65_536;
export const bigEnvelopeElementsMax = 32;
/** Deepest container nesting accepted in wire msgpack (Salt data is shallow; states nest ~10). */
export const msgpackDepthMax = 100;
/** Total containers' elements in one frame; with frameBytesMax this bounds allocation. */
export const msgpackElementsMax = 4_000_000;
/** Longest minion id, in bytes: it becomes a file name. */
export const minionIdBytesMax = 255;
/** RSA ciphertext and signature fields (token, tok, sig) are one modulus long; 16384-bit keys are the largest we take. */
export const rsaBlockBytesMax = 2048;
