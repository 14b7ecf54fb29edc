/**
 * A peer organization (the design card's "federation peer"): created pending by an admin, activated,
 * suspended or revoked. `ESTABLISH` records a trust (the shared secret and its end) and makes a pending
 * peer active; `TRUST_EXPIRE`, a durable timer at `expires_at`, marks the trust expired (has_trust stays).
 * Pure: time arrives as `now` on every event.
 */
import { assign, setup } from 'xstate';
import { refuseAction } from './refuse.js';

export type PeerState = 'pending' | 'active' | 'suspended' | 'revoked';

export interface PeerContext {
  id: string;
  name: string;
  endpoint: string;
  /** signal types the peer may send */
  allowed_scopes: string[];
  has_trust: boolean;
  expires_at: string | null;
  /** the HMAC key of the trust as issued; shown only by the answer that issues it */
  shared_secret: string | null;
  /** set by the TRUST_EXPIRE timer; calls compare expires_at too, so a late timer lets nothing through */
  trust_expired: boolean;
  establish_requested_at: string | null;
  establish_requested_by: string | null;
  created_by: string;
  created_at: string;
  updated_at: string;
  /** requests a minute this peer may make to the proof routes; null: FEDERATION_PEER_RATE_LIMIT; 0: no limit (absent on older records) */
  rate_limit?: number | null;
  /** bytes of signal copies this peer may store here; null: FEDERATION_PEER_STORAGE_QUOTA_BYTES; 0: no limit (absent on older records) */
  storage_quota_bytes?: number | null;
}

/** The per-peer overrides of the federation limits (docs/federation.md, Limits); null falls back to the setting. */
export type PeerLimits = Pick<PeerContext, 'rate_limit' | 'storage_quota_bytes'>;

export type PeerEvent =
  | { type: 'ACTIVATE'; now: number }
  | { type: 'SUSPEND'; now: number }
  | { type: 'REVOKE'; now: number }
  | { type: 'ESTABLISH'; now: number; by: string; shared_secret: string; expires_at: string }
  | { type: 'TRUST_EXPIRE'; now: number }
  | ({ type: 'SET_LIMITS'; now: number } & PeerLimits);

const iso = (ms: number) => new Date(ms).toISOString();

export const peerMachine = setup({
  types: { context: {} as PeerContext, events: {} as PeerEvent },
  actions: {
    refuse: refuseAction,
    touch: assign(({ event }) => ({ updated_at: iso(event.now) })),
    trust: assign(({ event }) => {
      const e = event as Extract<PeerEvent, { type: 'ESTABLISH' }>;
      return { has_trust: true, shared_secret: e.shared_secret, expires_at: e.expires_at, trust_expired: false, establish_requested_at: iso(e.now), establish_requested_by: e.by, updated_at: iso(e.now) };
    }),
    expire: assign(({ event }) => ({ trust_expired: true, updated_at: iso(event.now) })),
    limits: assign(({ event }) => {
      const e = event as Extract<PeerEvent, { type: 'SET_LIMITS' }>;
      return { ...(e.rate_limit !== undefined && { rate_limit: e.rate_limit }), ...(e.storage_quota_bytes !== undefined && { storage_quota_bytes: e.storage_quota_bytes }), updated_at: iso(e.now) };
    }),
  },
  guards: {
    validTrust: ({ event }) => event.type === 'ESTABLISH' && typeof event.shared_secret === 'string' && event.shared_secret.length > 0 && !Number.isNaN(Date.parse(event.expires_at)),
    trustOver: ({ context, event }) => context.has_trust && !context.trust_expired && context.expires_at !== null && Date.parse(context.expires_at) <= event.now,
  },
}).createMachine({
  id: 'peer',
  initial: 'pending',
  context: {} as PeerContext,
  states: {
    pending: {
      on: {
        ACTIVATE: { target: 'active', actions: 'touch' },
        SUSPEND: { target: 'suspended', actions: 'touch' },
        REVOKE: { target: 'revoked', actions: 'touch' },
        ESTABLISH: { guard: 'validTrust', target: 'active', actions: 'trust' },
        TRUST_EXPIRE: { guard: 'trustOver', actions: 'expire' },
        SET_LIMITS: { actions: 'limits' },
      },
    },
    active: {
      on: {
        SUSPEND: { target: 'suspended', actions: 'touch' },
        REVOKE: { target: 'revoked', actions: 'touch' },
        ESTABLISH: { guard: 'validTrust', target: 'active', actions: 'trust' },
        TRUST_EXPIRE: { guard: 'trustOver', actions: 'expire' },
        SET_LIMITS: { actions: 'limits' },
      },
    },
    suspended: {
      on: {
        ACTIVATE: { target: 'active', actions: 'touch' },
        REVOKE: { target: 'revoked', actions: 'touch' },
        TRUST_EXPIRE: { guard: 'trustOver', actions: 'expire' },
        SET_LIMITS: { actions: 'limits' },
      },
    },
    revoked: {},
  },
});

/** PATCH .../status names the state to reach; this is the event that moves there. */
export const PEER_STATUS_EVENT: Record<Exclude<PeerState, 'pending'>, PeerEvent['type']> = { active: 'ACTIVATE', suspended: 'SUSPEND', revoked: 'REVOKE' };

type PeerFields = Omit<PeerContext, 'has_trust' | 'expires_at' | 'shared_secret' | 'trust_expired' | 'establish_requested_at' | 'establish_requested_by' | 'updated_at' | 'rate_limit' | 'storage_quota_bytes'> & PeerLimits;

export const newPeer = (c: PeerFields): { value: PeerState; context: PeerContext } => ({
  value: 'pending',
  context: { rate_limit: null, storage_quota_bytes: null, ...c, has_trust: false, expires_at: null, shared_secret: null, trust_expired: false, establish_requested_at: null, establish_requested_by: null, updated_at: c.created_at },
});

/** A peer created together with its trust (POST /federation/trust): active at once. */
export const newTrustedPeer = (c: PeerFields, trust: { shared_secret: string; expires_at: string }): { value: PeerState; context: PeerContext } => ({
  value: 'active',
  context: { ...newPeer(c).context, has_trust: true, ...trust, establish_requested_at: c.created_at, establish_requested_by: c.created_by },
});

/** The durable timer a peer implies: a live trust expires at its `expires_at`. */
export function peerTimers(context: PeerContext): { event: PeerEvent['type']; at: number }[] {
  return context.has_trust && !context.trust_expired && context.expires_at ? [{ event: 'TRUST_EXPIRE', at: Date.parse(context.expires_at) }] : [];
}

/** Whether a trust has run out at `now` (the timer may not have fired yet). */
export const trustExpired = (c: PeerContext, now: number): boolean => c.trust_expired || (c.expires_at !== null && Date.parse(c.expires_at) <= now);
