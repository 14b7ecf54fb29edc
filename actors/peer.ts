/**
 * A peer organization (the design card's "federation peer"): created pending by an admin, activated,
 * suspended or revoked. `ESTABLISH` records a trust request; the federation work turns it into the
 * handshake and fills `has_trust` / `expires_at`. Pure: time arrives as `now` on every event.
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
  establish_requested_at: string | null;
  establish_requested_by: string | null;
  created_by: string;
  created_at: string;
  updated_at: string;
}

export type PeerEvent =
  | { type: 'ACTIVATE'; now: number }
  | { type: 'SUSPEND'; now: number }
  | { type: 'REVOKE'; now: number }
  | { type: 'ESTABLISH'; now: number; by: string };

const iso = (ms: number) => new Date(ms).toISOString();

export const peerMachine = setup({
  types: { context: {} as PeerContext, events: {} as PeerEvent },
  actions: {
    refuse: refuseAction,
    touch: assign(({ event }) => ({ updated_at: iso(event.now) })),
    requestTrust: assign(({ event }) => ({
      establish_requested_at: iso(event.now),
      establish_requested_by: (event as Extract<PeerEvent, { type: 'ESTABLISH' }>).by,
      updated_at: iso(event.now),
    })),
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
        ESTABLISH: { target: 'pending', actions: 'requestTrust' },
      },
    },
    active: {
      on: {
        SUSPEND: { target: 'suspended', actions: 'touch' },
        REVOKE: { target: 'revoked', actions: 'touch' },
        ESTABLISH: { target: 'active', actions: 'requestTrust' },
      },
    },
    suspended: {
      on: {
        ACTIVATE: { target: 'active', actions: 'touch' },
        REVOKE: { target: 'revoked', actions: 'touch' },
      },
    },
    revoked: {},
  },
});

/** PATCH .../status names the state to reach; this is the event that moves there. */
export const PEER_STATUS_EVENT: Record<Exclude<PeerState, 'pending'>, PeerEvent['type']> = { active: 'ACTIVATE', suspended: 'SUSPEND', revoked: 'REVOKE' };

export const newPeer = (c: Omit<PeerContext, 'has_trust' | 'expires_at' | 'establish_requested_at' | 'establish_requested_by' | 'updated_at'>): { value: PeerState; context: PeerContext } => ({
  value: 'pending',
  context: { ...c, has_trust: false, expires_at: null, establish_requested_at: null, establish_requested_by: null, updated_at: c.created_at },
});
