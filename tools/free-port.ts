/**
 * A TCP port free on `host` right now, for tests, benchmarks and local launchers.
 *
 * Picked at random below Linux's ephemeral range (32768–60999 by default) and checked by listening on it,
 * rather than asking the OS for port 0: a port the OS hands out from the ephemeral range can be taken by
 * some process's outgoing connection between this check and the caller's bind (seen once in the suite as
 * EADDRINUSE on a master's bind). Ports below that range are only taken by explicit binds. A port is never
 * handed out twice by one process.
 */
import net from "node:net";

/** the range ports are picked from: below the ephemeral range, above the well-known services */
const PICK_PORT_MIN = 20_000;
const PICK_PORT_MAX = 32_767;
/** ports tried before giving up, count */
const PICK_ATTEMPTS_MAX = 200;

const handedOut = new Set<number>();

function canListen(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", () => resolve(false));
    s.listen({ port, host, exclusive: true }, () => s.close(() => resolve(true)));
  });
}

export async function freePort(host = "127.0.0.1"): Promise<number> {
  for (let i = 0; i < PICK_ATTEMPTS_MAX; i++) {
    const port = PICK_PORT_MIN + Math.floor(Math.random() * (PICK_PORT_MAX - PICK_PORT_MIN + 1));
    if (handedOut.has(port)) continue;
    if (await canListen(port, host)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free TCP port on ${host} in ${PICK_PORT_MIN}-${PICK_PORT_MAX} after ${PICK_ATTEMPTS_MAX} tries`);
}
