/**
 * Bounds on replicated cluster state, named with their units. They are derived from the shared ring buffer's
 * limits so that anything the state machines accept can always be published to every thread: a committed
 * entry that the buffer could not hold would leave masters unable to apply the log.
 */
import { DEFAULT_RING_LIMITS } from "./sab-ring/layout.js";

export const clusterLimits = Object.freeze({
  /** voters in one group, count (they form a ring, so bounded by the ring's node table) */
  votersMax: DEFAULT_RING_LIMITS.ringNodesMax,
  /** learners in one group, count */
  learnersMax: 256,
  /** UTF-8 bytes of one node id */
  nodeIdBytesMax: DEFAULT_RING_LIMITS.nodeIdBytesMax,
  /** UTF-8 bytes of one ring id */
  ringIdBytesMax: DEFAULT_RING_LIMITS.ringNameBytesMax,
  /** active named rings at once, count ("cluster" takes one record of the buffer) */
  activeRingsMax: DEFAULT_RING_LIMITS.ringsMax - 1,
  /** ring ids ever registered, destroyed ones included (they stay for audit), count */
  registryRingsMax: 256,
  /** data types in the routing table, count (Salt never deletes a route, it routes to None) */
  routesMax: DEFAULT_RING_LIMITS.dataTypesMax,
  /** UTF-8 bytes of one data type name */
  dataTypeBytesMax: DEFAULT_RING_LIMITS.dataTypeBytesMax,
  /** replicas a ring may ask for, count */
  replicasMax: DEFAULT_RING_LIMITS.ringNodesMax,
  /** bytes of one encoded entry; CONFIG with votersMax + learnersMax ids of nodeIdBytesMax fits */
  entryBytesMax: 64 * 1024,
  /** bytes of one group snapshot */
  snapshotBytesMax: 4 * 1024 * 1024,
});
