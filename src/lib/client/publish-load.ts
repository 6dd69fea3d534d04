/**
 * The clear `publish` request's load as Salt's CLI sends it (LocalClient.pub), in its key order:
 * used by brine's own `salt` (local-client.ts) and by the load tool (tools/swarm/publish-client.ts), which
 * both speak to a master's request port with the root key.
 */

export interface PublishFields {
  tgt: string | string[];
  fun: string | string[];
  arg?: unknown[];
  tgt_type?: string;
  /** returner(s), "" for none */
  ret?: string;
  /** "" lets the master choose */
  jid?: string;
  /** null: no kwargs key at all, as LocalClient.cmd() sends (salt-cp) */
  kwargs?: Record<string, unknown> | null;
}

/** The CLI's kwargs when the caller gives none. */
const DEFAULT_KWARGS = { show_timeout: true, show_jid: false, delimiter: ":" };

export function publishLoad(job: PublishFields, key: string, user: string): Record<string, unknown> {
  const load: Record<string, unknown> = {
    cmd: "publish",
    tgt: job.tgt,
    fun: job.fun,
    arg: job.arg ?? [],
    key,
    tgt_type: job.tgt_type ?? "glob",
    ret: job.ret ?? "",
    jid: job.jid ?? "",
  };
  if (job.kwargs !== null) load.kwargs = job.kwargs ?? { ...DEFAULT_KWARGS };
  load.user = user;
  return load;
}
