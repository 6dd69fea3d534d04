/**
 * Synthetic grains for test minions: the keys targeting and the master's data cache look at (os, kernel,
 * ids, addresses, versions), plus `swarm_index`/`swarm_group`/`roles` so grain and compound targets can
 * pick subsets of a swarm. Small on purpose: a real minion sends ~75 keys, this sends ~30.
 */
export interface GrainOptions {
  /** the minion's number in a swarm */
  index?: number;
  /** the address it connects from */
  ip?: string;
  /** the Salt version it pretends to be */
  saltversion?: string;
  /** extra grains merged last */
  extra?: Record<string, unknown>;
}

export function syntheticGrains(id: string, opts: GrainOptions = {}): Record<string, unknown> {
  const ip = opts.ip ?? "127.0.0.1";
  const version = opts.saltversion ?? "3007.8";
  const [major, minor] = version.split(".").map((x) => Number.parseInt(x, 10) || 0);
  const index = opts.index ?? 0;
  const roles = index % 3 === 0 ? ["web"] : index % 3 === 1 ? ["db"] : ["cache"];
  return {
    id,
    host: id,
    fqdn: id,
    localhost: id,
    nodename: id,
    domain: "",
    kernel: "Linux",
    kernelrelease: "6.1.0-brine",
    os: "Debian",
    os_family: "Debian",
    osfullname: "Debian GNU/Linux",
    osrelease: "12",
    osmajorrelease: 12,
    oscodename: "bookworm",
    osarch: "amd64",
    cpuarch: "x86_64",
    num_cpus: 2,
    mem_total: 2048,
    init: "systemd",
    ipv4: [ip],
    ipv6: [],
    fqdn_ip4: [ip],
    fqdn_ip6: [],
    ip4_interfaces: { lo: [ip] },
    ip_interfaces: { lo: [ip] },
    machine_id: Buffer.from(id).toString("hex").padEnd(32, "0").slice(0, 32),
    saltversion: version,
    saltversioninfo: [major, minor],
    virtual: "physical",
    swarm_index: index,
    swarm_group: `g${index % 10}`,
    roles,
    ...opts.extra,
  };
}
