/**
 * ipcidr targeting (`-S`, `S@`): an IP address or a network, matched against a minion's `ipv4` or `ipv6`
 * grain (the family of the target picks the grain).
 *
 * Target parsing follows Python's `ipaddress.ip_address` then `ip_network` (strict): IPv4 without leading
 * zeros; a network with host bits set (`10.0.0.1/8`) is invalid, as in Salt; an IPv4 network may give its
 * mask as a prefix length, a netmask or a hostmask. An invalid target matches nothing.
 */
import { BlockList, isIPv4, isIPv6 } from "node:net";
import { isDict } from "./pystr.js";

export type IpFamily = "ipv4" | "ipv6";

export interface IpTarget {
  family: IpFamily;
  /** an address target compares for equality; a network target for membership */
  kind: "address" | "network";
  /** holds the one address or the one subnet */
  list: BlockList;
}

function isAddress(text: string, family: IpFamily): boolean {
  // a zone index (`fe80::1%eth0`) never equals a grain value and is not a valid network address
  if (text.includes("%")) return false;
  return family === "ipv4" ? isIPv4(text) : isIPv6(text);
}

function ipv4ToInt(text: string): number {
  return text.split(".").reduce((acc, octet) => acc * 256 + Number(octet), 0);
}

/** Prefix length of a contiguous IPv4 netmask (`255.255.0.0`) or hostmask (`0.0.255.255`), else null. */
function ipv4MaskPrefix(mask: string): number | null {
  if (!isIPv4(mask)) return null;
  const value = ipv4ToInt(mask);
  const netmask = (prefix: number): number => (prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0);
  // like Python, read it as a netmask first (so 255.255.255.255 is /32, not a /0 hostmask)
  for (let prefix = 0; prefix <= 32; prefix += 1) if (value === netmask(prefix)) return prefix;
  for (let prefix = 0; prefix <= 32; prefix += 1) if (value === ~netmask(prefix) >>> 0) return prefix;
  return null;
}

function parsePrefix(text: string, family: IpFamily): number | null {
  const max = family === "ipv4" ? 32 : 128;
  if (/^[0-9]+$/.test(text)) {
    const n = Number(text);
    return n <= max ? n : null;
  }
  return family === "ipv4" ? ipv4MaskPrefix(text) : null;
}

/** True when no bit of `address` beyond the first `prefix` bits is set (Python's strict networks). */
function hostBitsClear(address: string, prefix: number, family: IpFamily): boolean {
  const bits = addressBits(address, family);
  return !bits.slice(prefix).includes("1");
}

/** The address as a fixed-width bit string (32 or 128 characters). */
function addressBits(address: string, family: IpFamily): string {
  if (family === "ipv4") return ipv4ToInt(address).toString(2).padStart(32, "0");
  return ipv6Bits(address);
}

/** 128-character bit string of an IPv6 address (handles `::` and an embedded dotted IPv4 tail). */
function ipv6Bits(address: string): string {
  let text = address;
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail) {
    const v4 = ipv4ToInt(tail[1]!);
    text = text.slice(0, tail.index) + ((v4 >>> 16) & 0xffff).toString(16) + ":" + (v4 & 0xffff).toString(16);
  }
  const [head, rest] = text.includes("::") ? text.split("::") : [text, undefined];
  const left = head ? head.split(":") : [];
  const right = rest ? rest.split(":") : [];
  const fill = rest === undefined ? [] : new Array<string>(8 - left.length - right.length).fill("0");
  return [...left, ...fill, ...right].map((h) => parseInt(h, 16).toString(2).padStart(16, "0")).join("");
}

/** Parses an ipcidr target; null when it is neither an address nor a strict network. */
export function parseIpTarget(tgt: unknown): IpTarget | null {
  if (typeof tgt !== "string") return null;
  for (const family of ["ipv4", "ipv6"] as const) {
    if (isAddress(tgt, family)) {
      const list = new BlockList();
      list.addAddress(tgt, family);
      return { family, kind: "address", list };
    }
  }
  const parts = tgt.split("/");
  if (parts.length !== 2) return null;
  const [addr, mask] = parts as [string, string];
  for (const family of ["ipv4", "ipv6"] as const) {
    if (!isAddress(addr, family)) continue;
    const prefix = parsePrefix(mask, family);
    if (prefix === null || !hostBitsClear(addr, prefix, family)) return null;
    const list = new BlockList();
    list.addSubnet(addr, prefix, family);
    return { family, kind: "network", list };
  }
  return null;
}

/**
 * Does a minion with these grains match the target? The grain for the target's family must be present;
 * it is normally a list of address strings (a single string is treated as a one-element list). Values
 * that are not addresses of that family are skipped.
 */
export function ipcidrMatch(target: IpTarget | string, grains: unknown): boolean {
  const parsed = typeof target === "string" ? parseIpTarget(target) : target;
  if (parsed === null || !isDict(grains) || !Object.hasOwn(grains, parsed.family)) return false;
  const raw = grains[parsed.family];
  const values = Array.isArray(raw) ? raw : [raw];
  for (const value of values) {
    if (typeof value !== "string" || !isAddress(value, parsed.family)) continue;
    if (parsed.list.check(value, parsed.family)) return true;
  }
  return false;
}
