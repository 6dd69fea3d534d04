/** The shared ring buffer: layout, hash, slot assignment, the single writer and the any-thread reader. */
export {
  CLUSTER_RING,
  DEFAULT_RING_LIMITS,
  NO_OWNER,
  createRingBuffer,
  readLayout,
  resolveRingLimits,
  ringReadRetriesMax,
  ringSlots,
  type RingLayout,
  type RingLimits,
} from "./layout.js";
export { KEY_SEED, NODE_SEED, fmix32, hashBytes, hashString, hrwScore, nodeHash } from "./hash.js";
export {
  assignSlots,
  checkAssignment,
  emptyAssignment,
  preferenceOrder,
  tableChecksum,
  type RingAssignment,
} from "./assign.js";
export { RingWriter, type RingTarget } from "./writer.js";
export { RingReader, type DropStats, type GateVerdict, type RingView } from "./reader.js";
