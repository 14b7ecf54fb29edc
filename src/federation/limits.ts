/**
 * A federation peer's limits (docs/federation.md, Limits): a request budget on the proof routes (the key
 * limiter's counters, src/auth/rate-limit.ts) and a storage quota on the bytes of the signal copies it
 * stored here, counted in a usage record written in the commit that stores each copy.
 */
import type { PeerLimits } from '../../actors/peer.js';
import type { RateLimits } from '../auth/rate-limit.js';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import type { Op, Store } from '../store/port.js';

export const usageKey = (peerId: string) => `fed-usage:${peerId}`;

/** What a peer has stored here: its signal copies and their bytes. */
export interface PeerUsage {
  stored_bytes: number;
  stored_signals: number;
}

/** A peer as the limits read it: its id and its own overrides. */
type Limited = { id: string } & PeerLimits;

const NONE: PeerUsage = { stored_bytes: 0, stored_signals: 0 };

export class PeerLimiter {
  constructor(
    private store: Store,
    private limits: RateLimits,
    private config: Pick<Config, 'federationPeerRateLimit' | 'federationPeerStorageQuotaBytes'>,
  ) {}

  /** The limits in force for a peer: its own, else the settings'; 0 means none. */
  of(peer: PeerLimits): { rate_limit: number; storage_quota_bytes: number } {
    return { rate_limit: peer.rate_limit ?? this.config.federationPeerRateLimit, storage_quota_bytes: peer.storage_quota_bytes ?? this.config.federationPeerStorageQuotaBytes };
  }

  /** Spends one request of the peer's budget, or RATE_LIMIT_EXCEEDED; answers the RateLimit-* headers. */
  spend(peer: Limited): Promise<Record<string, string>> {
    return this.limits.consumePeer(peer.id, this.of(peer).rate_limit);
  }

  /**
   * The op that charges a new copy of `bytes` to the peer, for the commit that stores it (version-checked, so
   * concurrent copies on any instance add up); FED_QUOTA_EXCEEDED when it would pass the quota.
   */
  async charge(peer: Limited, bytes: number): Promise<Op[]> {
    const cur = await this.store.get<PeerUsage>(usageKey(peer.id));
    const used = cur?.value ?? NONE;
    const quota = this.of(peer).storage_quota_bytes;
    if (quota && used.stored_bytes + bytes > quota)
      throw new AppError('FED_QUOTA_EXCEEDED', `This peer may store ${quota} bytes here; it stores ${used.stored_bytes} and the signal takes ${bytes}`, { limit: quota, stored_bytes: used.stored_bytes, bytes });
    const next: PeerUsage = { stored_bytes: used.stored_bytes + bytes, stored_signals: used.stored_signals + 1 };
    return [{ op: 'put', key: usageKey(peer.id), value: next, expect: cur?.version ?? 0 }];
  }

  /** GET /admin/peers: each peer with its limits in force and its usage (requests this window, bytes stored). */
  async withUsage<P extends Limited>(peers: P[]): Promise<(P & { limits: ReturnType<PeerLimiter['of']>; usage: PeerUsage & { requests: Awaited<ReturnType<RateLimits['peerRate']>> } })[]> {
    const stored = await this.store.getMany<PeerUsage>(peers.map((p) => usageKey(p.id)));
    return Promise.all(
      peers.map(async (p, i) => {
        const limits = this.of(p);
        return { ...p, limits, usage: { ...(stored[i]?.value ?? NONE), requests: await this.limits.peerRate(p.id, limits.rate_limit) } };
      }),
    );
  }
}
