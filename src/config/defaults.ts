import os from "node:os";

/**
 * Salt's master defaults (salt/config/__init__.py DEFAULT_MASTER_OPTS) for every option brine reads.
 * Paths are the system ones; `root_dir` prefixes them as Salt's apply_master_config does.
 */
export interface MasterConfig {
  id: string;
  root_dir: string;
  conf_file: string;
  interface: string;
  ipv6: boolean;
  publish_port: number;
  ret_port: number;
  worker_threads: number;
  pki_dir: string;
  cachedir: string;
  sock_dir: string;
  log_file: string;
  log_level: string;
  log_level_logfile: string | null;
  user: string;
  keysize: number;
  auth_events: boolean;
  auto_accept: boolean;
  open_mode: boolean;
  autosign_file: string | null;
  autoreject_file: string | null;
  autosign_grains_dir: string | null;
  autosign_timeout: number;
  permissive_pki_access: boolean;
  max_minions: number;
  rotate_aes_key: boolean;
  ping_on_rotate: boolean;
  publish_session: number;
  request_server_ttl: number;
  sign_pub_messages: boolean;
  publish_signing_algorithm: string;
  master_sign_pubkey: boolean;
  keep_jobs_seconds: number;
  job_cache: boolean;
  job_cache_store_endtime: boolean;
  minion_data_cache: boolean;
  /** keep a minion's cached data (grains, pillar, mine, session key) after its key is deleted (Salt's option) */
  preserve_minion_cache: boolean;
  hash_type: string;
  timeout: number;
  gather_job_timeout: number;
  loop_interval: number;
  presence_events: boolean;
  nodegroups: Record<string, string | string[]>;
  file_roots: Record<string, string[]>;
  pillar_roots: Record<string, string[]>;
  file_buffer_size: number;
  publisher_acl_blacklist: { users?: string[]; modules?: string[] };
  pub_hwm: number;
  zmq_backlog: number;
  allow_minion_key_revoke: boolean;
  require_minion_sign_messages: boolean;
  drop_messages_signature_fail: boolean;
  minion_data_cache_events: boolean;
  cluster_id: string | null;
  cluster_peers: string[];
  cluster_pki_dir: string | null;
  cluster_pool_port: number;
  /** fileserver (roots backend) */
  fileserver_backend: string[];
  file_ignore_regex: string[];
  file_ignore_glob: string[];
  fileserver_followsymlinks: boolean;
  fileserver_ignoresymlinks: boolean;
  master_tops: Record<string, unknown>;
  /** state system settings sent to minions by `_master_opts` */
  top_file_merging_strategy: string;
  env_order: string[];
  default_top: string;
  renderer: string;
  renderer_blacklist: string[];
  renderer_whitelist: string[];
  failhard: boolean;
  state_top: string;
  state_top_saltenv: string | null;
  state_auto_order: boolean;
  state_events: boolean;
  state_aggregate: boolean;
  jinja_env: Record<string, unknown>;
  jinja_sls_env: Record<string, unknown>;
  jinja_lstrip_blocks: boolean;
  jinja_trim_blocks: boolean;
  /** pillar */
  pillar_source_merging_strategy: string;
  pillar_merge_lists: boolean;
  pillar_includes_override_sls: boolean;
  pillar_safe_render_error: boolean;
  pillarenv: string | null;
  pillarenv_from_saltenv: boolean;
  pillar_opts: boolean;
  ext_pillar: unknown[];
  decrypt_pillar: unknown[];
  /** brine: requests waiting per lane before "retry later" replies */
  brine_queue_len_max: number;
  /** brine: a sign-in that waited longer than this (ms) is answered retry-later unworked (0: never) */
  brine_auth_stale_ms: number;
  /** brine: LMDB map size in bytes */
  brine_lmdb_map_bytes: number;
  [key: string]: unknown;
}

export function masterDefaults(): MasterConfig {
  return {
    id: "",
    root_dir: "/",
    conf_file: "/etc/salt/master",
    interface: "0.0.0.0",
    ipv6: false,
    publish_port: 4505,
    ret_port: 4506,
    // Salt's default: each request lane (auth, req) runs this many threads
    worker_threads: 5,
    pki_dir: "/etc/salt/pki/master",
    cachedir: "/var/cache/salt/master",
    sock_dir: "/var/run/salt/master",
    log_file: "/var/log/salt/master",
    log_level: "warning",
    log_level_logfile: null,
    user: "root",
    keysize: 2048,
    auth_events: true,
    auto_accept: false,
    open_mode: false,
    autosign_file: null,
    autoreject_file: null,
    autosign_grains_dir: null,
    autosign_timeout: 120,
    permissive_pki_access: false,
    max_minions: 0,
    rotate_aes_key: true,
    ping_on_rotate: false,
    publish_session: 86400,
    request_server_ttl: 0,
    sign_pub_messages: true,
    publish_signing_algorithm: "PKCS1v15-SHA1",
    master_sign_pubkey: false,
    keep_jobs_seconds: 86400,
    job_cache: true,
    job_cache_store_endtime: false,
    minion_data_cache: true,
    preserve_minion_cache: false,
    hash_type: "sha256",
    timeout: 5,
    gather_job_timeout: 10,
    loop_interval: 60,
    presence_events: false,
    nodegroups: {},
    file_roots: { base: ["/srv/salt", "/srv/spm/salt"] },
    pillar_roots: { base: ["/srv/pillar", "/srv/spm/pillar"] },
    file_buffer_size: 1048576,
    publisher_acl_blacklist: {},
    pub_hwm: 1000,
    zmq_backlog: 1000,
    allow_minion_key_revoke: true,
    require_minion_sign_messages: false,
    drop_messages_signature_fail: false,
    minion_data_cache_events: false,
    cluster_id: null,
    cluster_peers: [],
    cluster_pki_dir: null,
    cluster_pool_port: 4520,
    fileserver_backend: ["roots"],
    file_ignore_regex: [],
    file_ignore_glob: [],
    fileserver_followsymlinks: true,
    fileserver_ignoresymlinks: false,
    master_tops: {},
    top_file_merging_strategy: "merge",
    env_order: [],
    default_top: "base",
    renderer: "jinja|yaml",
    renderer_blacklist: [],
    renderer_whitelist: [],
    failhard: false,
    state_top: "top.sls",
    state_top_saltenv: null,
    state_auto_order: true,
    state_events: false,
    state_aggregate: false,
    jinja_env: {},
    jinja_sls_env: {},
    jinja_lstrip_blocks: false,
    jinja_trim_blocks: false,
    pillar_source_merging_strategy: "smart",
    pillar_merge_lists: false,
    pillar_includes_override_sls: false,
    pillar_safe_render_error: true,
    pillarenv: null,
    pillarenv_from_saltenv: false,
    pillar_opts: false,
    ext_pillar: [],
    decrypt_pillar: [],
    brine_queue_len_max: 10000,
    // a minion's auth_timeout is 5 s: past that it has given up on the request and sent another
    brine_auth_stale_ms: 4500,
    brine_lmdb_map_bytes: 8 * 1024 * 1024 * 1024,
  };
}

/** Options whose values are paths that `root_dir` prefixes (Salt's prepend_root_dir list). */
export const ROOT_DIR_PATHS = ["pki_dir", "cachedir", "sock_dir", "log_file", "autosign_file", "autoreject_file", "autosign_grains_dir", "cluster_pki_dir"] as const;
