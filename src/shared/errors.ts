/**
 * The one catalogue of coded errors. Every error brine raises on a protocol, storage or cluster path is
 * a BrineError with a code from here, so logs, replies and tests can match on the code, not the text.
 *
 * Add codes in the section of your area; keep messages short and operator-facing.
 *
 * The Error classes that are not BrineErrors are kept on purpose, each saying why in its header: Salt's own
 * exception types whose name or text is on the wire (SaltInvocationError, CommandExecutionError, PyTypeError,
 * PyValueError, UndefinedError, TemplateRaise, PyError, FunctionError, TopError, RequisiteError, RenderError,
 * YamlError, FilterError), the HTTP API's status-carrying ApiError (rest_cherrypy's contract), and unwinders
 * private to one module that never leave it (Skip, CompoundError, InvalidTarget, ExpansionError,
 * BudgetExceeded). Anything else a user can see is a BrineError.
 */

export const ERR = {
  // --- protocol / wire ---
  FRAME_TOO_LARGE: "frame exceeds frameBytesMax",
  MSGPACK_TRUNCATED: "msgpack data is truncated",
  MSGPACK_INVALID: "msgpack data is malformed",
  MSGPACK_TOO_DEEP: "msgpack nesting exceeds msgpackDepthMax",
  MSGPACK_TOO_MANY: "msgpack container exceeds msgpackElementsMax",
  MSGPACK_EXT: "msgpack extension type is not allowed",
  CRYPTICLE_AUTH: "HMAC check failed",
  CRYPTICLE_FORMAT: "ciphertext is malformed",
  CRYPTICLE_NONCE: "nonce mismatch",
  RSA_DECRYPT: "RSA decryption failed",
  RSA_BAD_KEY: "RSA key could not be parsed",
  X931_FORMAT: "X9.31 block is malformed",
  BAD_ENC_ALGO: "bad enc algo",
  BAD_SIG_ALGO: "bad sig algo",
  BAD_LOAD: "bad load",
  BAD_ID: "invalid minion id",
  BAD_JID: "invalid jid",
  // --- master / request handling ---
  QUEUE_FULL: "request queue is full, retry later",
  SHUTTING_DOWN: "master is shutting down",
  AUTH_DENIED: "authentication denied",
  PUBLISH_AUTH: "Authentication error occurred.",
  NOT_ALLOWED: "command is not allowed",
  // --- config ---
  CONFIG_INVALID: "configuration is invalid",
  CONFIG_UNDECLARED: "an option is read that src/shared/config/schema.ts does not declare (a brine bug)",
  // --- raft ---
  RAFT_NO_LEADER: "no leader within the deadline",
  RAFT_NOT_VOTER: "node is not a voter",
  RAFT_REJECTED: "proposal rejected",
  RAFT_CONF_IN_FLIGHT: "a membership change is already in flight",
  RAFT_STOPPED: "raft group is stopped",
  RAFT_COMPACTED: "requested index is compacted",
  RAFT_UNAVAILABLE: "requested entries are unavailable",
  RAFT_UNKNOWN: "outcome unknown: the proposal may or may not have committed",
  RAFT_API_MISUSE: "raft API called out of order",
  RAFT_STORAGE: "raft storage could not be opened or written; the raft worker stops",
  RAFT_UNKNOWN_GROUP: "no such raft group on this node",
  // --- ring ---
  RING_TOO_MANY_NODES: "ring exceeds ringNodesMax",
  RING_BAD_NODE_ID: "invalid ring node id",
  RING_BAD_NAME: "invalid ring name",
  RING_BAD_DATA_TYPE: "invalid data type name",
  RING_BAD_QUERY: "invalid ring query argument",
  RING_BAD_ASSIGNMENT: "slot table is inconsistent with its node list",
  RING_TOO_MANY_RINGS: "rings exceed ringsMax",
  RING_TOO_MANY_DATA_TYPES: "routed data types exceed dataTypesMax",
  RING_EPOCH_REGRESSED: "ring epoch went backwards or was reused for another table",
  RING_LAYOUT_MISMATCH: "shared ring buffer has an unknown or corrupt layout",
  RING_WRITER_CLAIMED: "the shared ring buffer already has a writer",
  RING_TORN_READ: "ring read kept racing the writer past ringReadRetriesMax",
  // --- cluster ---
  CLUSTER_BAD_NODE_ID: "wildcard or duplicate node id",
  CLUSTER_PEER_REFUSED: "peer refused",
  CLUSTER_BAD_ENTRY: "malformed cluster log entry",
  CLUSTER_WRONG_GROUP: "entry kind does not belong to this raft group",
  CLUSTER_BAD_RING_ID: "invalid or reserved ring id",
  CLUSTER_TOO_MANY: "cluster state would exceed its limits",
  CLUSTER_RING_CONFLICT: "ring registry change conflicts with the ring's current state",
  CLUSTER_BAD_SNAPSHOT: "malformed cluster state snapshot",
  CLUSTER_CONFIG: "cluster configuration is invalid",
  CLUSTER_KEY: "cluster key is missing or unreadable",
  CLUSTER_HANDSHAKE: "peer handshake failed",
  CLUSTER_PEER_UNKNOWN: "no such peer",
  CLUSTER_PEER_DOWN: "connection to the peer was lost",
  CLUSTER_PEER_QUEUE_FULL: "peer send queue is full",
  CLUSTER_PEER_TIMEOUT: "peer request timed out",
  CLUSTER_PEER_REPLAY: "replayed or reordered peer frame",
  CLUSTER_PEER_AUTH: "peer frame failed authentication",
  CLUSTER_PEER_FRAME: "malformed or oversized peer frame",
  CLUSTER_PEER_CHANNEL: "invalid peer channel or handler",
  CLUSTER_PEER_REMOTE: "the peer's handler failed",
  CLUSTER_PEER_CLOSED: "peer transport is closed",
  // --- swarm / tools ---
  SWARM_FD_LIMIT: "file-descriptor limit too low for this many minions",
  SWARM_KEY_POOL: "key pool could not be read or written",
  SWARM_PUBLISH: "publish request failed",
  SWARM_WORKER: "swarm worker failed",
  SWARM_OPTIONS: "invalid swarm options",
  MINION_AUTH_TIMEOUT: "sign-in got no reply from the master",
  MINION_AUTH_PENDING: "minion key is still pending on the master",
  MINION_AUTH_REJECTED: "the master rejected the minion key",
  MINION_AUTH_FULL: "the master is full (max_minions)",
  MINION_AUTH_INVALID: "the master's sign-in reply did not verify",
  MINION_MASTER_KEY_CHANGED: "The master key has changed",
  MINION_BAD_ALGO: "the master refused the encryption or signing algorithm",
  MINION_REQ_TIMEOUT: "request to the master timed out",
  MINION_BAD_LOAD: "the master answered \"bad load\" again after re-authentication",
  MINION_BAD_REPLY: "reply could not be decrypted or verified",
  MINION_STOPPED: "minion is stopped",
  // --- eauth and authorization ---
  EAUTH_TOKEN_STORE: "the eauth token could not be stored",
  EAUTH_BACKEND: "the eauth backend failed",
  // --- HTTP API ---
  API_BAD_REQUEST: "bad request",
  API_START: "the HTTP API could not start",
  API_MASTER: "the master did not answer the HTTP API's request",
  API_REQUEST_TOO_LARGE: "the request is larger than the master takes from a client",
  // --- job cache, control socket, master keys ---
  STORE_DAMAGED: "the job cache is damaged",
  CONTROL_FRAME: "control socket frame is malformed or too large",
  MASTER_KEY_INVALID: "the master key file is not a usable RSA private key",
  // --- pidfile ---
  PIDFILE_LOCKED: "another master holds the pidfile",
  // --- multi-master signing and syndic ---
  MASTER_SIGN: "the master public key signature cannot be made",
  SYNDIC_CONFIG: "the syndic configuration is not usable",
  SYNDIC_QUEUE: "the syndic forward queue is damaged",
  // --- ring runners ---
  CLUSTER_NO_SUCH_RING: "no such active ring",
  CLUSTER_RING_UNREACHABLE: "no master hosting the ring answered",
  CLUSTER_BAD_ARGUMENT: "invalid cluster runner argument",
  CLUSTER_NOT_COMMITTED: "the change did not commit",
  // --- minion key store (keys.cache_driver), pki runners, cluster health ---
  KEYS_STORE_NETWORK_FS: "the indexed key store cannot live on a network filesystem",
  // --- state-sync (keys, roots, banks between masters) ---
  STATE_SYNC_BAD_ARGUMENT: "invalid state-sync runner argument",
  STATE_SYNC_UNAVAILABLE: "the state-sync thread did not answer",
  // --- threads: calls between them (src/shared/port-calls.ts) ---
  THREAD_GONE: "the thread is not running",
  THREAD_NO_ANSWER: "the thread did not answer",
  THREAD_CALL: "the call failed in the other thread",
  // --- pillar and fileserver subprocesses (folded from GitError and CommandLimitError) ---
  GIT_FAILED: "a git command failed",
  PILLAR_CMD_LIMIT: "an ext_pillar command passed its limit",
  // --- cluster join (isolated filesystem) ---
  CLUSTER_JOIN_REFUSED: "the join was refused",
  CLUSTER_JOIN_TIMEOUT: "the master could not join the cluster in time",
  CLUSTER_JOIN_FRAME: "malformed join frame",
  CLUSTER_JOIN_SYNC: "the joining master's state-sync did not finish",
  // --- job placement ---
  PLACEMENT_NO_TABLE: "the ring's slot table is not known on this master",
  PLACEMENT_BAD_MESSAGE: "malformed job placement message",
  PLACEMENT_WATCHES_FULL: "too many jobs' returns are watched on this master",
  // --- the state-sync thread's ports: the mirror (src/main-thread/state-sync-host.ts), the link, runners ---
  MIRROR_BAD_CHUNK: "a peer's bulk-sync chunk was not stored",
  MIRROR_BACKLOG_FULL: "mirror backlog full",
  STATE_SYNC_FAILED: "the state-sync call failed",
  STATE_SYNC_RESTARTING: "the state-sync thread ended and is being restarted; ask again",
  // --- runners' arguments (jobs.*) ---
  RUNNER_BAD_ARGUMENT: "invalid runner argument",
  // --- minion data placement (grains, pillar, mine on a ring's owners) ---
  MINION_PLACEMENT_BAD_MESSAGE: "malformed minion data placement message",
  MINION_PLACEMENT_PLACED: "the minion bank is placed on a ring",
  // --- the replay nonce owner check between masters (src/shared/nonce-owner.ts) ---
  NONCE_OWNER_BAD_ASK: "malformed nonce owner ask",
  // --- minion-facing transport (brine_minion_transport: native) ---
  TRANSPORT_BAD_ENDPOINT: "the minion-facing port cannot listen on this address",
  // --- peer requests of a kind a master does not know (mixed versions: src/workers/raft/peer-kinds.ts) ---
  PEER_UNKNOWN_KIND: "the master does not know this kind of request (it runs another version of brine)",
  // --- a resent request's reply, asked of the other masters (src/main-thread/cluster/resend-replies.ts) ---
  RESEND_BAD_ASK: "malformed reply ask (not a request's nonce and tag)",
} as const;

export type ErrCode = keyof typeof ERR;

export class BrineError extends Error {
  readonly code: ErrCode;
  constructor(code: ErrCode, detail?: string) {
    super(detail ? `${ERR[code]}: ${detail}` : ERR[code]);
    this.code = code;
    this.name = "BrineError";
  }
}

export function isBrineError(e: unknown, code?: ErrCode): e is BrineError {
  return e instanceof BrineError && (code === undefined || e.code === code);
}
