/**
 * The SSRF guard: a webhook may reach only public addresses unless ALLOW_PRIVATE_NETWORK is set. Every
 * address the host resolves to is checked, and the connection goes to a checked address (the lookup
 * handed to the HTTP client), so a second DNS answer cannot swap in a private one.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

const blocked = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96]] as const) blocked.addSubnet(net, bits, 'ipv6');

/** Private, loopback, link-local, multicast or otherwise not public. */
export function isPrivateAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return blocked.check(mapped[1], 'ipv4');
  const family = isIP(address);
  if (family === 0) return true;
  return blocked.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

export class AddressRefused extends Error {}

/** The addresses `host` resolves to, all of them allowed, or AddressRefused. */
export async function allowedAddresses(host: string, allowPrivate: boolean): Promise<{ address: string; family: number }[]> {
  const bare = host.replace(/^\[|\]$/g, '');
  const addrs = isIP(bare) ? [{ address: bare, family: isIP(bare) }] : await dnsLookup(bare, { all: true, verbatim: true });
  if (!addrs.length) throw new AddressRefused(`${host} resolves to no address`);
  if (!allowPrivate) {
    const bad = addrs.find((a) => isPrivateAddress(a.address));
    if (bad) throw new AddressRefused(`${host} resolves to ${bad.address}, a private, loopback or link-local address`);
  }
  return addrs;
}
