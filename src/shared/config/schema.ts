/**
 * Every option brine reads, declared once: its type, bounds, default and one line of doc (TypeBox). The
 * loader (load.ts) checks a configuration against it, the typed readers of each area (auth/options.ts,
 * auth/backends/*, api/options.ts, master/minion-policy.ts, cluster/config.ts, the request lanes) take
 * their defaults and bounds from it, `masterDefaults()` is built from it, and docs/CONFIG.md is generated
 * from it (`npm run config:docs`, scripts/config-docs.mjs).
 *
 * Being declared here is what "brine implements this option" means: a Salt master option that is not
 * declared (src/shared/config/salt-master-options.ts lists Salt's) is warned about at start as not implemented.
 *
 * Conventions: Salt's names, types and defaults where Salt has the option (salt/config/__init__.py
 * DEFAULT_MASTER_OPTS, VALID_OPTS); brine's own options are `brine_*` (and `brine_api`). An option without
 * a `default` is absent unless set (its doc says what absent means; `docDefault` says it for the docs). Values are checked and coerced by checkOption (options.ts).
 * `Type` is json-schema.ts's: TypeBox's builder signatures and JSON Schema, without loading TypeBox (issue 17).
 */
import type { Static, TSchema } from "@sinclair/typebox";
import { Type } from "./json-schema.js";

/** Extra annotations on an option's schema (TypeBox keeps unknown keys). */
interface Notes {
  /** how the default reads in docs when it is computed at start (no `default`) */
  docDefault?: string;
  /** a unit for docs: seconds, ms, bytes, MiB, minutes */
  unit?: string;
}

const PORT_MAX = 65535;
/** ten years, seconds: the longest duration option brine takes */
const DECADE_S = 10 * 365 * 86400;
const GiB = 1024 * 1024 * 1024;

const int = (dflt: number | undefined, min: number, max: number, description: string, notes: Notes = {}) =>
  Type.Integer({ ...(dflt === undefined ? {} : { default: dflt }), minimum: min, maximum: max, description, ...notes });
const num = (dflt: number | undefined, min: number, max: number, description: string, notes: Notes = {}) =>
  Type.Number({ ...(dflt === undefined ? {} : { default: dflt }), minimum: min, maximum: max, description, ...notes });
const bool = (dflt: boolean, description: string) => Type.Boolean({ default: dflt, description });
const str = (dflt: string, description: string, notes: Notes = {}) => Type.String({ default: dflt, description, ...notes });
const optStr = (description: string, notes: Notes = {}) => Type.Optional(Type.String({ description, ...notes }));
/** a string or null, null by default (Salt's `None`) */
const strOrNull = (description: string) => Type.Union([Type.String(), Type.Null()], { default: null, description });
const oneOf = <T extends string>(values: readonly [T, ...T[]], dflt: T, description: string) =>
  Type.Union(
    values.map((v) => Type.Literal(v)),
    { default: dflt, description },
  );
const strList = (description: string, dflt: string[] = []) => Type.Array(Type.String(), { default: dflt, description });
const map = (description: string) => Type.Record(Type.String(), Type.Unknown(), { default: {}, description });
const roots = (dflt: Record<string, string[]>, description: string) => Type.Record(Type.String(), Type.Array(Type.String()), { default: dflt, description });
const port = (dflt: number, description: string) => int(dflt, 0, PORT_MAX, description);

/** Salt's log levels (salt/_logging LOG_LEVELS), and `warn` which brine reads as `warning`. */
export const LOG_LEVELS = ["all", "garbage", "trace", "debug", "profile", "info", "warning", "warn", "error", "critical", "quiet"] as const;
/** hash types brine's file server computes (Salt's `hash_type`) */
export const HASH_TYPES = ["md5", "sha1", "sha224", "sha256", "sha384", "sha512"] as const;

/**
 * salt-api's `rest_cherrypy:` section, and brine's `brine_api:` with the same keys (brine_api's entries win).
 * Read by src/api/options.ts.
 */
export const ApiSectionSchema = Type.Object(
  {
    port: int(8000, 0, PORT_MAX, "TCP port of the HTTP API"),
    host: str("0.0.0.0", "address the HTTP API listens on"),
    ssl_crt: optStr("PEM certificate file (required unless disable_ssl)"),
    ssl_key: optStr("PEM private key file (required unless disable_ssl)"),
    disable_ssl: bool(false, "serve plain HTTP"),
    debug: bool(false, "tracebacks in 500 answers"),
    cors_origin: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { description: "allowed CORS origins (`*`: any); none by default: no CORS headers (rest_tornado's name)" })),
    max_request_body_size: int(1_048_576, 1024, GiB, "request bodies above this are answered 413", { unit: "bytes" }),
    webhook_disable_auth: bool(false, "the webhook URL takes requests without a token"),
    webhook_url: str("/hook", "path prefix of the webhook"),
    stats_disable_auth: bool(false, "/stats without a token"),
    authorized_ips: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { description: "when set, only these source addresses are served (403 otherwise)" })),
    login_failures_per_minute: int(10, 1, 1_000_000, "brine: failed /login attempts per source address per minute before 429"),
    requests_per_minute: int(0, 0, 100_000_000, "brine: requests per source address per minute before 429 (0: no limit)"),
  },
  { additionalProperties: true, description: "HTTP API section" },
);

/** `brine_metrics:`, the Prometheus endpoint (src/main-thread/metrics-options.ts); `brine_metrics: true` takes every default. */
export const MetricsSectionSchema = Type.Object(
  {
    port: int(9108, 0, PORT_MAX, "TCP port of the metrics endpoint (0: the system chooses)"),
    host: str("127.0.0.1", "address it listens on (the figures name minions and nodes: loopback unless told otherwise)"),
    path: str("/metrics", "URL path of the figures"),
  },
  { additionalProperties: false },
);

/** formats and password hashes of the `file` eauth backend (Salt's salt/auth/file.py) */
export const FILE_EAUTH_FILETYPES = ["text", "htpasswd", "htdigest"] as const;
export const FILE_EAUTH_HASHTYPES = ["plaintext", "md5", "sha1", "sha224", "sha256", "sha384", "sha512"] as const;

/**
 * The `file` eauth backend's options, which Salt keeps inside `external_auth: file:` as `^name` keys.
 * Read by src/lib/auth/backends/file.ts.
 */
export const FileEauthSchema = Type.Object(
  {
    "^filename": optStr("the password file (required when external_auth names file)"),
    "^filetype": oneOf(FILE_EAUTH_FILETYPES, "text", "format of ^filename"),
    "^hashtype": oneOf(FILE_EAUTH_HASHTYPES, "plaintext", "hash of the passwords in a text file"),
    "^field_separator": str(":", "field separator of a text file"),
    "^username_field": int(1, 1, 1000, "field of the user name in a text file (1-based)"),
    "^password_field": int(2, 1, 1000, "field of the password in a text file (1-based)"),
    "^realm": optStr("realm of an htdigest file (required for htdigest)"),
  },
  { additionalProperties: true },
);


/** The master configuration. */
export const MasterConfigSchema = Type.Object(
  {
    // --- files and identity ---
    id: str("", "this master's id; empty: `<hostname>_master`"),
    root_dir: str("/", "prefix of pki_dir, cachedir, sock_dir, log_file, pidfile, extension_modules and the autosign paths (Salt's prepend_root_dir; not cluster_pki_dir, as in Salt 3007)"),
    conf_file: str("/etc/salt/master", "the main configuration file (set by the loader)"),
    default_include: str("master.d/*.conf", "glob of files read after the main file, relative to its directory; silent when nothing matches"),
    include: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { description: "more files or globs to read (relative to the including file's directory); a pattern that matches nothing is warned about" })),
    pidfile: str("/var/run/salt-master.pid", "the master's pidfile (root_dir applies); --pid-file overrides it"),
    user: str("root", "the user the master runs as (owner of the root key)"),
    pki_dir: str("/etc/salt/pki/master", "the master's key and the minions' keys"),
    cachedir: str("/var/cache/salt/master", "job cache, minion data, brine's LMDB environments"),
    sock_dir: str("/var/run/salt/master", "event bus and control sockets"),
    log_file: str("/var/log/salt/master", "log file"),
    log_level: oneOf(LOG_LEVELS, "warning", "console log level"),
    log_level_logfile: Type.Union([...LOG_LEVELS.map((l) => Type.Literal(l)), Type.Null()], { default: null, description: "log file level; null: log_level" }),
    // --- network ---
    interface: str("0.0.0.0", "address the publisher and request server listen on"),
    ipv6: bool(false, "listen on IPv6"),
    publish_port: port(4505, "publisher port"),
    ret_port: port(4506, "request server port"),
    worker_threads: int(5, 1, 1024, "request threads in all (Salt's MWorkers), split between the sign-in lane (half, rounded down) and the request lane (the rest), at least one each"),
    pub_hwm: int(1000, 0, 10_000_000, "publish port's ZeroMQ SNDHWM: publishes queued for one minion before the PUB socket drops further ones to it (libzmq drops them uncounted, as under Salt; 0: no bound)", { unit: "messages" }),
    pub_server_write_queue_size: int(10_000, 1, 1_000_000, "event bus: events queued for one reader (master_event_pub.ipc) before it is disconnected as too slow (Salt's option from saltstack/salt#70148, default 500 there; no released 3006/3007 bounds it, and brine's salt CLI reads returns from the bus, so 500 could cut a CLI off in a return flood)", { unit: "events" }),
    publish_drain_timeout: num(5, 0.001, 86_400, "event bus: longest an event may wait for one reader before that reader is disconnected as too slow (Salt's option, saltstack/salt#69995)", { unit: "seconds" }),
    zmq_backlog: int(1000, 0, 1_000_000, "listen backlog of the ZeroMQ sockets"),
    brine_minion_transport: oneOf(["libzmq", "native"], "native", "what serves the minion-facing ports (publish_port, ret_port): `native` (brine's own ZMTP 3.1 server on Node's net: same wire protocol, NULL mechanism only, a few KB per connected minion instead of libzmq's ~40 KB, and the master knows its subscribers without reading /proc) or `libzmq` (ZeroMQ sockets through zeromq.js, the default until session 9); see docs/ARCHITECTURE.md, \"The minion-facing transport\""),
    brine_zmq_batch_bytes: int(1024, 256, 65_536, "with `brine_minion_transport: libzmq`: libzmq's encoder and decoder buffer per connection of the request and publish ports (ZMQ_IN/OUT_BATCH_SIZE; libzmq's own default is 8,192): the largest share of libzmq's memory per connected minion; larger messages bypass it (set with the native transport, it is warned about: nothing reads it)", { unit: "bytes" }),
    // --- keys and sign-in ---
    keysize: Type.Union([Type.Literal(1024), Type.Literal(2048), Type.Literal(3072), Type.Literal(4096)], { default: 2048, description: "size of the RSA keys the master generates, bits" }),
    auth_events: bool(true, "fire salt/auth events on sign-ins"),
    auto_accept: bool(false, "accept every new minion key"),
    open_mode: bool(false, "accept every key, even a changed one (never in production)"),
    autosign_file: strOrNull("file of ids (globs, regexes) whose keys are accepted"),
    autoreject_file: strOrNull("file of ids (globs, regexes) whose keys are rejected"),
    autosign_grains_dir: strOrNull("directory of grain-named files listing values that autosign"),
    autosign_timeout: int(120, 0, 525_600, "how long a salt-key --gen-keys stub autosigns", { unit: "minutes" }),
    permissive_pki_access: bool(false, "accept group-writable autosign files"),
    max_minions: int(0, 0, 100_000_000, "most accepted minions that may sign in (0: no limit)"),
    allow_minion_key_revoke: bool(true, "a minion may revoke its own key"),
    rotate_aes_key: bool(true, "rotate the AES key when a key is deleted or rejected"),
    ping_on_rotate: bool(false, "ping every minion after a key rotation"),
    publish_session: int(86400, 1, DECADE_S, "lifetime of the AES session key", { unit: "seconds" }),
    request_server_ttl: int(0, 0, DECADE_S, "requests older than this are dropped (0: never)", { unit: "seconds" }),
    sign_pub_messages: bool(true, "sign published jobs with the master key"),
    publish_signing_algorithm: oneOf(["PKCS1v15-SHA1", "PKCS1v15-SHA224"], "PKCS1v15-SHA1", "signature algorithm of published jobs"),
    master_sign_pubkey: bool(false, "accepted sign-ins carry pub_sig, the signature of the master public key, for minions with verify_master_pubkey_sign"),
    master_sign_key_name: str("master_sign", "name of the signing pair in pki_dir (<name>.pem/.pub, generated when missing); minions hold <name>.pub"),
    master_use_pubkey_signature: bool(false, "send the pre-made signature in pki_dir/<master_pubkey_signature> instead of signing with the signing pair"),
    master_pubkey_signature: str("master_pubkey_signature", "file in pki_dir holding the pre-made base64 signature of master.pub (master_use_pubkey_signature)"),
    require_minion_sign_messages: bool(false, "refuse unsigned returns"),
    drop_messages_signature_fail: bool(false, "drop returns whose signature fails"),
    hash_type: oneOf(HASH_TYPES, "sha256", "hash of key fingerprints and file server hashes"),
    // --- jobs and data cache ---
    keep_jobs_seconds: int(86400, 0, DECADE_S, "how long jobs stay in the job cache (0: forever)", { unit: "seconds" }),
    job_cache: bool(true, "keep job returns"),
    runner_returns: bool(true, "store each runner call (its load and return) in the job cache as a job, as Salt does; False keeps runner calls out of it"),
    job_cache_store_endtime: bool(false, "record a job's end time"),
    minion_data_cache: bool(true, "keep minions' grains and pillar"),
    minion_data_cache_events: bool(false, "fire minion/refresh events when the data cache changes"),
    preserve_minion_cache: bool(false, "keep a minion's cached data after its key is deleted"),
    timeout: num(5, 0.001, 86_400, "default wait of `salt` for returns", { unit: "seconds" }),
    gather_job_timeout: num(10, 0.001, 86_400, "wait of the find_job check for running jobs", { unit: "seconds" }),
    loop_interval: int(60, 1, 86_400, "period of the maintenance loop", { unit: "seconds" }),
    presence_events: bool(false, "fire salt/presence events"),
    nodegroups: Type.Record(Type.String(), Type.Union([Type.String(), Type.Array(Type.String())]), { default: {}, description: "named compound targets" }),
    // --- file server ---
    file_roots: roots({ base: ["/srv/salt", "/srv/spm/salt"] }, "salt:// directories per environment"),
    fileserver_backend: strList("file server backends, in lookup order (brine: roots, gitfs)", ["roots"]),
    gitfs_remotes: Type.Array(Type.Unknown(), { default: [], description: "gitfs: git URLs, or one-key mappings {URL: [{param: value}…]} (per-remote base, root, mountpoint, name, saltenv, ref_types, refspecs, ssl_verify, saltenv_whitelist, saltenv_blacklist, disable_saltenv_mapping, update_interval, fallback, all_saltenvs)" }),
    gitfs_base: str("master", "gitfs: the branch or tag served as the base environment"),
    gitfs_root: str("", "gitfs: the subdirectory of each remote that is served"),
    gitfs_mountpoint: str("", "gitfs: where in salt:// each remote's files appear"),
    gitfs_ref_types: Type.Union([Type.String(), Type.Array(Type.String())], { default: ["branch", "tag", "sha"], description: "gitfs: which refs become environments (branch, tag; sha only for gitfs_base)" }),
    gitfs_refspecs: Type.Union([Type.String(), Type.Array(Type.String())], { default: ["+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"], description: "gitfs: what each update fetches" }),
    gitfs_ssl_verify: bool(true, "gitfs: check the certificates of https remotes"),
    gitfs_fallback: str("", "gitfs: the branch or tag served for an environment a remote has no ref for (empty: none)"),
    gitfs_saltenv_whitelist: Type.Union([Type.String(), Type.Array(Type.String())], { default: [], description: "gitfs: only environments matching these globs or regexes are served (empty: all)" }),
    gitfs_saltenv_blacklist: Type.Union([Type.String(), Type.Array(Type.String())], { default: [], description: "gitfs: environments matching these globs or regexes are not served" }),
    gitfs_disable_saltenv_mapping: bool(false, "gitfs: branches and tags are not environments by their names (only base and gitfs_saltenv's)"),
    gitfs_saltenv: Type.Array(Type.Unknown(), { default: [], description: "gitfs: per-environment ref, root and mountpoint for every remote ([{env: [{ref: …}, …]}])" }),
    gitfs_update_interval: int(60, 1, 86_400, "gitfs: seconds between fetches of each remote (per-remote update_interval overrides)", { unit: "seconds" }),
    git_pillar_base: str("master", "git_pillar: the branch that is the base pillar environment"),
    git_pillar_branch: str("master", "git_pillar: the branch of a remote given without one"),
    git_pillar_env: str("", "git_pillar: the pillar environment of every remote (empty: from its branch)"),
    git_pillar_root: str("", "git_pillar: the subdirectory of each remote holding the pillar tree"),
    git_pillar_ssl_verify: bool(true, "git_pillar: check the certificates of https remotes"),
    git_pillar_fallback: str("", "git_pillar: the branch checked out when a remote's branch does not exist (empty: none)"),
    git_pillar_refspecs: Type.Union([Type.String(), Type.Array(Type.String())], { default: ["+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"], description: "git_pillar: what each update fetches" }),
    git_pillar_includes: bool(true, "git_pillar: a tree's SLS may include SLS of the other trees of its environment"),
    git_pillar_update_interval: int(60, 1, 86_400, "git_pillar: seconds between fetches of the remotes (the first at start)", { unit: "seconds" }),
    file_ignore_regex: strList("file server paths matching these regexes are hidden"),
    file_ignore_glob: strList("file server paths matching these globs are hidden"),
    fileserver_followsymlinks: bool(true, "follow symlinks in file_roots"),
    fileserver_ignoresymlinks: bool(false, "hide symlinks in file_roots"),
    file_buffer_size: int(1_048_576, 1, 64 * 1024 * 1024, "chunk size of file transfers", { unit: "bytes" }),
    master_tops: map("master_tops modules and their options"),
    // --- state system settings sent to minions ---
    top_file_merging_strategy: oneOf(["merge", "same", "merge_all"], "merge", "how top files of several environments combine"),
    env_order: strList("order of environments in the top file merge"),
    default_top: str("base", "environment whose top file is used with `same`"),
    renderer: str("jinja|yaml", "default render pipeline"),
    renderer_blacklist: strList("renderers never used"),
    renderer_whitelist: strList("only these renderers are used (empty: all)"),
    failhard: bool(false, "stop a state run at the first failure"),
    test: bool(false, "state runs (orchestration on the master) default to test mode"),
    state_top: str("top.sls", "name of the top file"),
    state_top_saltenv: strOrNull("only this environment's top file is read"),
    state_auto_order: bool(true, "states run in file order"),
    state_events: bool(false, "fire an event per state"),
    state_aggregate: Type.Union([Type.Boolean(), Type.Array(Type.String())], { default: false, description: "aggregate states (true: all, or a list of state modules)" }),
    jinja_env: map("Jinja environment options of templates"),
    jinja_sls_env: map("Jinja environment options of SLS files"),
    jinja_lstrip_blocks: bool(false, "Jinja lstrip_blocks"),
    jinja_trim_blocks: bool(false, "Jinja trim_blocks"),
    // --- pillar ---
    pillar_roots: roots({ base: ["/srv/pillar", "/srv/spm/pillar"] }, "pillar directories per environment"),
    pillar_source_merging_strategy: oneOf(["smart", "recurse", "aggregate", "overwrite", "none"], "smart", "how pillar SLS files merge"),
    pillar_merge_lists: bool(false, "merge lists instead of replacing them"),
    pillar_includes_override_sls: bool(false, "included SLS override the including one"),
    pillar_safe_render_error: bool(true, "hide render errors' details from minions"),
    pillarenv: strOrNull("the only pillar environment used"),
    pillarenv_from_saltenv: bool(false, "pillarenv follows the minion's saltenv"),
    pillar_opts: bool(false, "the master's options appear in pillar as `master`"),
    ext_pillar: Type.Array(Type.Unknown(), { default: [], description: "external pillars, in order: one-key mappings {module: arguments}; brine has cmd_json, cmd_yaml, file_tree, git" }),
    ext_pillar_first: bool(false, "external pillars are compiled before the pillar SLS (which then see their data as `pillar`)"),
    brine_ext_pillar_cmd_timeout: num(60, 0.1, 86_400, "longest run of a cmd_json/cmd_yaml command (its process group is killed after; the pillar gets an _errors line)", { unit: "seconds" }),
    decrypt_pillar: Type.Array(Type.Unknown(), { default: [], description: "pillar keys to decrypt" }),
    saltenv: strOrNull("default environment of file server and pillar requests"),
    // --- authorization ---
    external_auth: Type.Record(Type.String(), Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]), { default: {}, description: "eauth backend -> users/groups -> allowed functions" }),
    publisher_acl: map("local users of `salt` -> allowed functions"),
    publisher_acl_blacklist: Type.Object({ users: Type.Optional(Type.Array(Type.String())), modules: Type.Optional(Type.Array(Type.String())) }, { default: {}, description: "users and modules never allowed to publish" }),
    token_expire: int(43200, 1, DECADE_S, "lifetime of an eauth token", { unit: "seconds" }),
    token_expire_user_override: Type.Union([Type.Boolean(), Type.Record(Type.String(), Type.Unknown())], { default: false, description: "true, or {backend: [users]} who may ask for their own token_expire" }),
    keep_acl_in_token: bool(false, "store the user's permissions in the token"),
    permissive_acl: bool(false, "`*` entries apply even when a user's name matched"),
    sudo_acl: bool(false, "sudo_<user> publishes are limited by publisher_acl"),
    eauth_acl_module: str("", "backend whose `acl` gives every user's permissions (empty: each user's own backend)"),
    token_file: str("~/.salt_token", "where `salt -T` keeps the token"),
    sharedsecret: optStr("the password of the sharedsecret eauth backend"),
    brine_eauth_fail_max: int(5, 1, 1_000_000, "failed logins per user and source within brine_eauth_fail_window_s before further attempts are refused"),
    brine_eauth_fail_window_s: int(60, 1, 86400, "window of brine_eauth_fail_max", { unit: "seconds" }),
    "auth.ldap.uri": optStr("ldap:// or ldaps:// URI of the server (instead of server, port, tls)"),
    "auth.ldap.server": str("localhost", "LDAP server host"),
    "auth.ldap.port": int(389, 1, PORT_MAX, "LDAP server port"),
    "auth.ldap.tls": bool(false, "LDAP over TLS (ldaps)"),
    "auth.ldap.starttls": bool(false, "STARTTLS on a plain connection"),
    "auth.ldap.no_verify": bool(false, "do not check the server's certificate"),
    "auth.ldap.ca_file": optStr("PEM file of the CA that signed the server's certificate"),
    "auth.ldap.scope": int(2, 0, 2, "search scope: 0 base, 1 one level, 2 subtree"),
    "auth.ldap.basedn": str("", "search base"),
    "auth.ldap.binddn": optStr("lookup account, or a DN template with {{ username }}"),
    "auth.ldap.bindpw": optStr("password of the lookup account"),
    "auth.ldap.filter": optStr("search filter finding the user's entry, with {{ username }}"),
    "auth.ldap.anonymous": bool(false, "bind anonymously for the lookup"),
    "auth.ldap.accountattributename": str("memberUid", "group attribute listing member accounts"),
    "auth.ldap.groupattribute": str("memberOf", "user attribute listing groups"),
    "auth.ldap.groupou": str("Groups", "organisational unit of groups"),
    "auth.ldap.groupclass": str("posixGroup", "object class of groups"),
    "auth.ldap.group_basedn": optStr("search base of groups (freeipa)"),
    "auth.ldap.group_filter": optStr("search filter of groups (freeipa)"),
    "auth.ldap.persontype": str("person", "object class of users"),
    "auth.ldap.minion_stripdomains": strList("domains stripped from minion ids in ldap(...) targets"),
    "auth.ldap.activedirectory": bool(false, "the server is Active Directory"),
    "auth.ldap.freeipa": bool(false, "the server is FreeIPA"),
    "auth.ldap.auth_by_group_membership_only": bool(false, "ignored by brine: passwords are always checked"),
    "auth.ldap.timeout": num(5, 0.1, 120, "LDAP operation timeout", { unit: "seconds" }),
    "auth.pam.service": str("login", "PAM service of the pam eauth backend"),
    "auth.pam.helper": optStr("path of pamtester", { docDefault: "the first pamtester found in /usr/bin, /usr/sbin, /bin, /sbin" }),
    "auth.pam.timeout": num(10, 0.1, 120, "longest wait for the PAM helper", { unit: "seconds" }),
    // --- what a minion may send (master/minion-policy.ts) ---
    brine_minion_key_bits_min: int(2048, 1024, 16384, "smallest RSA key a minion may sign in with", { unit: "bits" }),
    brine_minion_key_bits_max: int(16384, 1024, 16384, "largest RSA key a minion may sign in with", { unit: "bits" }),
    brine_minion_key_exponent: int(65537, 3, 2 ** 31 - 1, "the only RSA public exponent taken"),
    brine_min_envelope_version: int(0, 0, 3, "requests in an envelope below this version are refused (3: no v2 minion)"),
    mine_max_size: int(16, 1, 4096, "most mine data one minion keeps", { unit: "MiB" }),
    max_pending_keys: int(10_000, 1, 10_000_000, "most keys waiting in minions_pre"),
    "keys.cache_driver": oneOf(["localfs_key", "mmap_key"], "localfs_key", "where minion keys live: files in pki_dir's minions* directories, or brine's indexed store (an LMDB environment in <pki dir>/brine-keys, authoritative; fill it with `salt-run pki.migrate_to_mmap`; refused on a network filesystem)"),
    // --- peer publish and file pushes from minions (workers/req-handler/peer-publish.ts, file-recv.ts) ---
    peer: Type.Record(Type.String(), Type.Array(Type.Unknown()), { default: {}, description: "minion id regex -> the functions (regexes, or {compound target: [functions]}) those minions may publish to others (publish.publish); empty: none" }),
    mine_get: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "minion id regex -> the mine functions (regexes) those minions may read with mine.get (and the master, by its id, with the mine.get runner); unset: every function" })),
    peer_run: Type.Record(Type.String(), Type.Array(Type.String()), { default: {}, description: "minion id regex -> the runner functions (regexes) those minions may run (publish.runner); empty: none" }),
    file_recv: bool(false, "minions may push files to the master (cp.push, cp.push_dir), into cachedir/minions/<id>/files"),
    file_recv_max_size: int(100, 1, 1_048_576, "largest file a minion may push", { unit: "MiB" }),
    // --- request lanes and storage ---
    brine_queue_len_max: int(10_000, 1, 10_000_000, "requests waiting per lane before refusals: a clear request is answered retry-later, an AES request left unanswered (its minion sends it again after its timeout)"),
    brine_clear_request_bytes_max: int(1024 * 1024, 64 * 1024, 64 * 1024 * 1024, "largest clear request (a CLI publish with its arguments, a runner or wheel call) taken from the request port; over 64 KiB one is decoded with at most 65,536 elements, over this bound it is refused before any container in it is read", { unit: "bytes" }),
    brine_session_table_minions: int(100_000, 1, 10_000_000, "minions whose session key the request threads share in one table (src/shared/session-table.ts: 256 bytes each, resident only as minions are stored); past it each thread reads the key file of a minion its own 512 entries do not hold", { unit: "minions" }),
    brine_key_table_minions: int(100_000, 1, 1_000_000, "minions whose accepted key and verified tok the request threads share in one table (src/shared/key-table.ts: 1,536 bytes each reserved, ~900 resident per 2,048-bit key stored); past it each thread keeps its own copy of the keys it reads", { unit: "minions" }),
    brine_auth_stale_ms: int(4500, 0, 3_600_000, "a sign-in that waited longer is answered retry-later unworked (0: never)", { unit: "ms" }),
    brine_worker_nice: int(0, 0, 19, "the request threads run this much nicer than the main thread (Linux: a thread's own nice), so the thread that accepts connections, reads requests and writes replies waits less behind RSA and job-cache work; 0: the same priority; ignored elsewhere (warned)", { unit: "nice steps" }),
    brine_lmdb_map_bytes: int(8 * GiB, 1024 * 1024, 2 ** 44, "LMDB map size", { unit: "bytes" }),
    brine_salt_job_files: bool(true, "also write each job's load where Salt's own tools look (cachedir/jobs, the local_cache layout)"),
    brine_lmdb_dir: optStr("brine's LMDB environment", { docDefault: "<cachedir>/brine-lmdb" }),
    brine_raft_lmdb_dir: optStr("the Raft log's LMDB environment", { docDefault: "<cachedir>/brine-raft-lmdb" }),
    brine_raft_leader_write: oneOf(["waited", "background"], "waited", "a Raft leader's own copy of its new entries: written on the Raft thread right after its appends have left, waited for as a follower's write is (the default: the fastest commit on a box whose cores are shared, where each hop to another thread waits for a CPU; bench/RESULTS.md, session 22), or committed on LMDB's write thread while the Raft thread reads its followers' answers (two thread hops more per commit; pays where the leader's disk is slower than its followers')"),
    brine_raft_stage_clock: bool(false, "the Raft thread times each stage of its work (NodeStatus.stages: wall µs and runs per stage, as bench/cluster.ts prints them per commit); off, it spends no CPU on it"),
    brine_local_dir: optStr("local disk for LMDB when cachedir is a network filesystem", { docDefault: "<root_dir>/var/lib/brine" }),
    brine_job_cache_check: oneOf(["full", "header", "off"], "full", "what the start checks of the job cache's data.mdb before any thread maps it: its header and every record (read in a child process, about 1 s per million records), the header only, or nothing"),
    brine_job_cache_damaged: oneOf(["refuse", "move_aside"], "refuse", "a damaged job cache: refuse to start with a message naming the file, or move its directory aside (<dir>.damaged-<time>) and start with an empty one, saying so"),
    // --- cluster ---
    cluster_id: strOrNull("name of the cluster; set: this master is clustered"),
    cluster_peers: Type.Array(Type.Union([Type.String(), Type.Object({ id: Type.Optional(Type.String()), host: Type.String(), port: Type.Optional(Type.Union([Type.Integer(), Type.String()])) })]), { default: [], description: "the other masters: host, host:port, or {id, host, port}" }),
    cluster_pki_dir: strOrNull("holds peers/<id>.pub; null: pki_dir"),
    cluster_pool_port: port(4520, "peer channel port"),
    cluster_port: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: PORT_MAX }), Type.String()], { description: "deprecated alias of cluster_pool_port" })),
    brine_presence: Type.Optional(Type.Union([Type.Literal("connections"), Type.Literal("heard")], { description: "how a master tells which minions are present", docDefault: "connections; heard when clustered" })),
    brine_presence_heard_s: num(60, 0.001, 86_400, "`heard`: how long a minion counts as present after it was heard from", { unit: "seconds" }),
    cluster_election_min: int(500, 100, 60_000, "a follower that hears from no leader for a random time in [cluster_election_min, cluster_election_max) campaigns; counted in the Raft worker's 50 ms heartbeats (rounded to one). A shorter one fails over sooner and risks needless elections on a loaded box (Salt 3008's RaftService: 750; etcd: 1000 with a 100 ms heartbeat). A follower whose connection to the leader drops does not wait for it: it campaigns within two heartbeats", { unit: "ms" }),
    cluster_election_max: Type.Optional(Type.Integer({ minimum: 200, maximum: 120_000, description: "the upper end of the election timeout: brine draws it in [min, 2 × min) as etcd does, so only 2 × cluster_election_min is taken (Salt's 750/1500 is); another value stops the start", docDefault: "2 × cluster_election_min", unit: "ms" })),
    brine_cluster_list_jobs_max: int(100_000, 1, 10_000_000, "with jobs placed on a ring, the most jobs a cluster-wide jobs.list_jobs or jobs.last_run reads from every master (the newest, after list_jobs' filters, which each master applies first; each master's list is read page by page only as far as needed): past it the older jobs are left out, with a warning in the log and on the runner's output (Salt has no such bound)", { unit: "jobs" }),
    brine_cluster_unhealthy_after_ms: int(5000, 1, 3_600_000, "a voter whose peer-channel session is down this long is listed in unhealthy_voters", { unit: "ms" }),
    brine_cluster_replay_owner_wait_ms: int(250, 0, 1000, "clustered: a request of a minion another master owns on the cluster ring waits this long at most for that master's word on its nonce (a frame replayed to two masters at once is accepted once); past it the request is accepted without it, counted and logged; 0 turns the check off (a replay within the forwarding delay may then be accepted twice)", { unit: "ms" }),
    brine_cluster_chaos_file: optStr("tests: node ids listed in this file are cut off"),
    cluster_isolated_filesystem: bool(false, "each master keeps its own cluster_pki_dir (and cachedir, roots): a new master joins with cluster_secret, pinned by cluster_pub_fingerprint or a cluster.pub it is given"),
    cluster_secret: strOrNull("the shared secret a joining master proves it knows (never sent: a keyed challenge/response); required in isolated mode unless brine_cluster_allow_empty_secret"),
    cluster_pub_fingerprint: strOrNull("the cluster public key a joiner trusts: `salt-key -F`'s cluster.pub line (hash_type, hex pairs with colons) or the same hex without colons"),
    cluster_join_timeout: int(300, 1, 86_400, "a master that can neither join nor found a cluster exits with a message after this long", { unit: "seconds" }),
    cluster_min_voters: int(3, 1, 64, "Salt's floor of voters: cluster.remove_member refuses to take a voter away when fewer would remain (force=True overrides, logged); brine has no automatic voter replacement, and warns at a promotion that leaves fewer"),
    brine_cluster_allow_empty_secret: bool(false, "isolated mode: start with an empty cluster_secret (any master that can reach the peer port and knows the fingerprint may join); logged as a warning at every start"),
    brine_cluster_found: bool(false, "isolated mode: found a new cluster now (make cluster.pem) when no configured peer answers with one, whatever the node ids; logged at start"),
    // --- master of masters (src/workers/req-handler/syndic-return.ts) ---
    order_masters: bool(false, "this master is a master of masters: it takes _syndic_return, publishes when none of its own minions match, and its syndics get the user's auth_list"),
    syndic_wait: int(5, 0, 86_400, "a master of masters' CLI waits at least this long for minions below syndics to report", { unit: "seconds" }),
    master_id: optStr("this master's name in its publishes (Salt's master_id): a syndic routes each return back to the master named here"),
    // --- salt-syndic (src/syndic/): read from the lower master's configuration ---
    syndic_master: Type.Union([Type.String(), Type.Array(Type.String(), { minItems: 1 })], { default: "masterofmasters", description: "salt-syndic: the master(s) of masters it signs in to (host or host:port; a list: several)" }),
    syndic_master_port: Type.Optional(Type.Integer({ minimum: 1, maximum: PORT_MAX, description: "salt-syndic: request port of the master of masters when syndic_master names none", docDefault: "4506" })),
    syndic_failover: oneOf(["random", "ordered"], "random", "salt-syndic with several masters of masters: which one takes a return that names no master (random, or the first connected in list order)"),
    syndic_mode: oneOf(["sync", "cluster"], "sync", "salt-syndic: sync forwards returns and the lower master's other events; cluster forwards returns only and none of jobs whose master_id is this syndic's"),
    syndic_event_forward_timeout: num(0.5, 0.01, 3600, "salt-syndic: how often gathered returns and events are sent up", { unit: "seconds" }),
    syndic_jid_forward_cache_hwm: int(100, 1, 10_000_000, "salt-syndic: how many jids whose job load was already sent up are remembered (the load goes up once per jid)"),
    syndic_finger: str("", "salt-syndic: pem_finger of the master of masters' key, checked at sign-in (empty: not checked)"),
    syndic_pidfile: str("/var/run/salt-syndic.pid", "salt-syndic's pidfile (root_dir applies)"),
    syndic_log_file: str("/var/log/salt/syndic", "salt-syndic's log file (root_dir applies)"),
    brine_syndic_queue_max: int(100_000, 100, 100_000_000, "salt-syndic: most minion returns waiting in the durable forward queue; past it the oldest are dropped, logged with their count"),
    // --- runners ---
    extension_modules: optStr("where synced custom modules go (root_dir applies)", { docDefault: "<cachedir>/extmods" }),
    extmod_whitelist: Type.Record(Type.String(), Type.Array(Type.String()), { default: {}, description: "module kind -> the only custom modules saltutil.sync_* copies" }),
    extmod_blacklist: Type.Record(Type.String(), Type.Array(Type.String()), { default: {}, description: "module kind -> custom modules saltutil.sync_* never copies" }),
    clean_dynamic_modules: bool(true, "sync_* removes custom modules no longer in the file roots"),
    // --- reactor and schedule (src/automation/) ---
    reactor: Type.Union([Type.String(), Type.Array(Type.Unknown())], { default: [], description: "tag glob -> reactor SLS files, as a list of one-key mappings, or a file holding that list" }),
    reactor_worker_threads: int(10, 1, 1024, "threads running reactor SLS"),
    reactor_worker_hwm: int(10_000, 1, 10_000_000, "reactions waiting before new ones are dropped"),
    reactor_refresh_interval: int(60, 1, 86_400, "how often the reactor map file is read again", { unit: "seconds" }),
    schedule: map("the master's schedule: job name -> job (and `enabled`)"),
    // --- metrics ---
    brine_metrics: Type.Optional(Type.Union([Type.Boolean(), Type.Partial(MetricsSectionSchema)], { description: "the Prometheus endpoint: true, or a mapping of the keys below; off when absent or false" })),
    // --- HTTP API ---
    // as a file holds them: the keys left out take their defaults in src/api/options.ts
    rest_cherrypy: Type.Optional(Type.Partial(ApiSectionSchema, { description: "salt-api's HTTP API section (see below)" })),
    brine_api: Type.Optional(Type.Partial(ApiSectionSchema, { description: "brine's name for the HTTP API section; its keys win over rest_cherrypy's" })),
    netapi_enable_clients: Type.Union([Type.String(), Type.Array(Type.String())], { default: [], description: "clients the HTTP API runs (Salt's default: none)" }),
    rest_timeout: num(300, 0.001, 86_400, "how long the HTTP API's runner client waits", { unit: "seconds" }),
    // --- the salt / salt-run / salt-cp command lines (read by the CLIs from the master config) ---
    state_output: str("full", "highstate outputter layout: full, terse, mixed, changes, filter (and full_id, terse_id, mixed_id, changes_id, filter_id)"),
    state_verbose: bool(true, "highstate outputter: also show states that succeeded without changes"),
    state_output_diff: bool(false, "highstate outputter: show only states that failed or changed"),
    state_output_profile: bool(true, "highstate outputter: each state's start time and duration, and the total run time"),
    state_output_pct: bool(false, "highstate outputter: success and failure percentages in the summary"),
    state_compress_ids: bool(false, "highstate outputter: states of one ID and result on one line, with their count"),
    state_output_exclude: Type.Union([Type.String(), Type.Array(Type.String())], { default: [], description: "state_output filter: results (True, False, None; a list or comma-separated) whose states are left out" }),
    state_output_terse: Type.Union([Type.String(), Type.Array(Type.String())], { default: [], description: "state_output filter: results (True, False, None; a list or comma-separated) whose states print on one line" }),
    state_tabular: Type.Union([Type.Boolean(), Type.String()], { default: false, description: "highstate outputter's terse lines in columns (true) or in this format string" }),
    cli_summary: bool(false, "salt prints a summary of the returns (as --summary)"),
    batch_safe_limit: int(0, 0, 100_000_000, "salt switches to batch mode when a target matches at least this many minions (0: never; as --batch-safe-limit)"),
    batch_safe_size: Type.Union([Type.Integer({ minimum: 1 }), Type.String()], { default: 8, description: "batch size when batch_safe_limit switches to batch mode (N or N%; as --batch-safe-size)" }),
    salt_cp_chunk_size: int(98304, 1, 64 * 1024 * 1024, "salt-cp --chunked: bytes read per chunk (each chunk is one publish)", { unit: "bytes" }),
  },
  { additionalProperties: true },
);

export type MasterConfigDeclared = Static<typeof MasterConfigSchema>;
export type OptionName = keyof typeof MasterConfigSchema.properties & string;

/** The schema of an option, or undefined when brine does not declare it. */
export function optionSchema(name: string): TSchema | undefined {
  return Object.hasOwn(MasterConfigSchema.properties, name) ? (MasterConfigSchema.properties as Record<string, TSchema>)[name] : undefined;
}

export function isDeclaredOption(name: string): name is OptionName {
  return Object.hasOwn(MasterConfigSchema.properties, name);
}
