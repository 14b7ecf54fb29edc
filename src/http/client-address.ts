/**
 * The client address a public route's budget is kept for: the socket's peer, or, when that peer is one of
 * TRUSTED_PROXIES, the nearest X-Forwarded-For hop that is not a trusted proxy itself (the rightmost one:
 * hops further left were written by the client and prove nothing). IPv6 clients are counted per /64, the
 * block one host is usually given, so drawing new addresses from it gains nothing.
 */
import { isIP } from 'node:net';

/** An address in one spelling: IPv4 dotted (IPv4-mapped IPv6 included), IPv6 as eight full hextets; undefined if not an IP. */
export function canonicalIp(text: string): string | undefined {
  const a = text.trim().replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const family = isIP(a);
  if (family === 4) return a;
  if (family !== 6) return undefined;
  const hextets = expand(a);
  const mapped = hextets.slice(0, 5).every((h) => h === 0) && hextets[5] === 0xffff;
  if (mapped) return [hextets[6] >> 8, hextets[6] & 255, hextets[7] >> 8, hextets[7] & 255].join('.');
  return hextets.map((h) => h.toString(16).padStart(4, '0')).join(':');
}

function expand(a: string): number[] {
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  let text = a;
  if (dotted) {
    const [b0, b1, b2, b3] = dotted[1].split('.').map(Number);
    text = a.slice(0, -dotted[1].length) + `${((b0 << 8) | b1).toString(16)}:${((b2 << 8) | b3).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const zeros = tail === undefined ? [] : Array(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].map((h) => parseInt(h, 16));
}

/** The budget key of an address: IPv4 as is, IPv6 its /64. */
const budgetKey = (ip: string): string => (ip.includes(':') ? `${ip.split(':').slice(0, 4).join(':')}::/64` : ip);

/** Resolves the client of a request from its socket peer and X-Forwarded-For, trusting only the proxies named. */
export function clientAddress(peer: string, forwardedFor: string | undefined, trusted: ReadonlySet<string>): string {
  let ip = canonicalIp(peer) ?? peer;
  if (trusted.has(ip) && forwardedFor) {
    const hops = forwardedFor.split(',').map((h) => canonicalIp(h)).reverse();
    for (const hop of hops) {
      // an unreadable hop ends the chain: what is left of it cannot be trusted either
      if (!hop) break;
      ip = hop;
      if (!trusted.has(hop)) break;
    }
  }
  return budgetKey(ip);
}
