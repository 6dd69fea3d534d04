/**
 * Which minions are connected (for "[Not connected]" and manage.up/down): the remote addresses of
 * ESTABLISHED TCP connections to the local publish port, read from /proc/net/tcp{,6} (what Salt
 * reads through `ss -ant`), matched against each minion's cached ipv4/ipv6 grains. Loopback peers
 * stand for every address of this host, as in Salt.
 */
import { readFileSync } from "node:fs";
import os from "node:os";

const TCP_ESTABLISHED = "01";

function hexToIpv4(h: string): string {
  const n = parseInt(h, 16);
  return [n & 255, (n >>> 8) & 255, (n >>> 16) & 255, (n >>> 24) & 255].join(".");
}

function hexToIpv6(h: string): string {
  // /proc prints the address as four little-endian 32-bit words
  const words: string[] = [];
  for (let i = 0; i < 4; i++) {
    const w = h.slice(i * 8, i * 8 + 8);
    const le = w.match(/../g)!.reverse().join("");
    words.push(le.slice(0, 4), le.slice(4, 8));
  }
  const full = words.map((w) => w.replace(/^0+(?=.)/, "").toLowerCase());
  const v4mapped = full.slice(0, 5).every((w) => w === "0") && full[5] === "ffff";
  if (v4mapped) {
    const a = parseInt(words[6]!, 16);
    const b = parseInt(words[7]!, 16);
    return `${a >> 8}.${a & 255}.${b >> 8}.${b & 255}`;
  }
  return full.join(":");
}

/** Remote IPs with an established connection to `port` on this host. */
export function peerAddresses(port: number, procDir = "/proc/net"): Set<string> {
  const out = new Set<string>();
  for (const [file, v6] of [["tcp", false], ["tcp6", true]] as const) {
    let text: string;
    try {
      text = readFileSync(`${procDir}/${file}`, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 4 || f[3] !== TCP_ESTABLISHED) continue;
      const [lip, lport] = f[1]!.split(":");
      const [rip] = f[2]!.split(":");
      if (parseInt(lport!, 16) !== port || !lip || !rip) continue;
      out.add(v6 ? hexToIpv6(rip) : hexToIpv4(rip));
    }
  }
  return out;
}

function localAddresses(): string[] {
  const out: string[] = [];
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) out.push(a.address);
  return out;
}

/**
 * Ids whose cached ipv4/ipv6 grains include a connected peer address.
 * `grainsOf` returns the cached grains of an accepted id (or undefined).
 */
export function connectedIds(
  acceptedIds: string[],
  grainsOf: (id: string) => Record<string, unknown> | undefined,
  peers: Set<string>,
): Set<string> {
  const addrs = new Set(peers);
  if (peers.has("127.0.0.1") || peers.has("::1")) for (const a of localAddresses()) addrs.add(a);
  const out = new Set<string>();
  for (const id of acceptedIds) {
    const g = grainsOf(id);
    if (!g) continue;
    const ips = [...(Array.isArray(g.ipv4) ? g.ipv4 : []), ...(Array.isArray(g.ipv6) ? g.ipv6 : [])];
    if (ips.some((ip) => typeof ip === "string" && addrs.has(ip))) out.add(id);
  }
  return out;
}
