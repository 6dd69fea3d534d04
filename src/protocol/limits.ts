/**
 * Wire limits. Every frame is checked against these before and while it is decoded, so a hostile
 * frame costs at most O(frameBytesMax) work and never more memory than its own size allows.
 */

/** Largest request frame accepted on the ROUTER socket (a big `_return` or a file chunk fits). */
export const frameBytesMax = 64 * 1024 * 1024;
/** Deepest container nesting accepted in wire msgpack (Salt data is shallow; states nest ~10). */
export const msgpackDepthMax = 100;
/** Total containers' elements in one frame; with frameBytesMax this bounds allocation. */
export const msgpackElementsMax = 4_000_000;
/** Longest minion id, in bytes: it becomes a file name. */
export const minionIdBytesMax = 255;
/** RSA ciphertext fields (token, aes, session) are one modulus long; 4096-bit keys are the largest we take. */
export const rsaBlockBytesMax = 512;
