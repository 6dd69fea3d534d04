/**
 * The names of the master's local sockets under `sock_dir`, known to the main thread that listens on them
 * and to every client (CLIs, the API and automation threads, runner threads) that connects.
 */
/** The event bus (Salt's name: a Python salt-api or `salt-run state.event` finds the master's bus by it). */
export const EVENT_SOCKET = "master_event_pub.ipc";
/** brine's control socket (salt-key, salt-run, runner threads). */
export const CONTROL_SOCKET = "brine_ctl.ipc";
