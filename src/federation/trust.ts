/**
 * Federation trust (docs/federation.md): a shared HMAC secret with a peer org, held on the peer actor.
 * One side creates it (`create`, or `establish` for a registered peer) and hands `peer_id`, `shared_secret`
 * and `expires_at` to the other operator, who records the same trust under the same `peer_id` (`record`).
 */
import { randomBytes } from 'node:crypto';
import { trustExpired, type PeerContext } from '../../actors/peer.js';
import { AppError } from '../errors.js';
import type { Principal } from '../identity/model.js';
import { now } from '../clock.js';
import { peerView, type PeerCreate, type Peers } from '../org/peers.js';
import type { ActorRecord } from '../runtime/runtime.js';
import { newId } from '../ids.js';
import { committedEffect } from '../store/idempotency.js';

/** A trust created without `expires_in` lasts this long. */
export const DEFAULT_TRUST_S = 30 * 24 * 3600;

export interface TrustIssued {
  peer_id: string;
  shared_secret: string;
  expires_at: string;
}

export interface TrustCreate extends PeerCreate {
  expires_in?: number;
}

export interface TrustRecord extends PeerCreate {
  peer_id: string;
  shared_secret: string;
  expires_at: string;
}

/** The peer and the secret an outbound call signs with; refuses as a receiving side would. */
export interface PeerTrust {
  peer: ReturnType<typeof peerView>;
  secret: string;
}

const newSecret = () => randomBytes(32).toString('hex');
const expiry = (expiresIn: number | undefined) => new Date(now() + (expiresIn ?? DEFAULT_TRUST_S) * 1000).toISOString();
const issued = (r: ActorRecord<PeerContext>): TrustIssued => ({ peer_id: r.context.id, shared_secret: r.context.shared_secret!, expires_at: r.context.expires_at! });

/**
 * The trust checks in the order the receiving side runs them after the proof parsed: an unknown or inactive
 * peer, no trust, an expired trust. Answers the record, whose secret verifies (or signs) the call.
 */
export function usableTrust(r: ActorRecord<PeerContext> | undefined, at: number): ActorRecord<PeerContext> & { context: { shared_secret: string } } {
  if (!r || r.value !== 'active') throw new AppError('FED_PEER_DENIED');
  if (!r.context.has_trust || !r.context.shared_secret) throw new AppError('FED_TRUST_NOT_ESTABLISHED');
  if (trustExpired(r.context, at)) throw new AppError('FED_TRUST_EXPIRED', undefined, { expires_at: r.context.expires_at });
  return r as ActorRecord<PeerContext> & { context: { shared_secret: string } };
}

export class Trust {
  constructor(private peers: Peers) {}

  /** A new peer with a fresh secret, active at once. */
  async create(by: Principal, body: TrustCreate): Promise<TrustIssued> {
    return committedEffect<TrustIssued>(by) ?? issued(await this.peers.createTrusted(by, body, { shared_secret: newSecret(), expires_at: expiry(body.expires_in) }, newId(), issued));
  }

  /** The other side of a trust issued by the peer: stored under its `peer_id`; an existing peer takes the new secret. */
  async record(by: Principal, body: TrustRecord): Promise<TrustIssued> {
    const done = committedEffect<TrustIssued>(by);
    if (done) return done;
    const at = Date.parse(body.expires_at);
    if (Number.isNaN(at) || at <= now()) throw new AppError('DISC_VALIDATION_FAILED', 'expires_at must be a future date-time', { field: 'expires_at', reason: 'format' });
    const trust = { shared_secret: body.shared_secret, expires_at: new Date(at).toISOString() };
    const cur = await this.peers.record(body.peer_id);
    if (cur) return issued(await this.peers.establish(body.peer_id, by, trust, issued));
    return issued(await this.peers.createTrusted(by, body, trust, body.peer_id, issued));
  }

  /** POST /org/company/peers/:id/establish: a fresh secret for a registered peer (pending or active). */
  async establish(peerId: string, by: Principal, expiresIn?: number): Promise<TrustIssued> {
    return issued(await this.peers.establish(peerId, by, { shared_secret: newSecret(), expires_at: expiry(expiresIn) }, issued));
  }

  async list(): Promise<{ active_peers: number; peers: { id: string; name: string; endpoint: string; has_trust: boolean; expires_at: string | null }[] }> {
    const all = await this.peers.list();
    return {
      active_peers: all.filter((p) => p.status === 'active').length,
      peers: all.map((p) => ({ id: p.id, name: p.name, endpoint: p.endpoint, has_trust: p.has_trust, expires_at: p.expires_at, status: p.status })),
    };
  }

  /** For signing an outbound call: the peer and its secret, refused like the receiving side would refuse. */
  async trustFor(peerId: string): Promise<PeerTrust> {
    const r = usableTrust(await this.peers.record(peerId), now());
    return { peer: peerView(r), secret: r.context.shared_secret };
  }

  /** For verifying an inbound call: the usable trust of the calling peer at `at`. */
  async verifying(peerId: string, at: number): Promise<ActorRecord<PeerContext> & { context: { shared_secret: string } }> {
    return usableTrust(await this.peers.record(peerId), at);
  }
}
