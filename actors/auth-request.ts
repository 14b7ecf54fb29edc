/**
 * A public join request: pending until an admin approves or rejects it, once. Pure: time arrives as `now`.
 * Approval names the identity the service creates in the same commit.
 */
import { assign, setup } from 'xstate';
import { refuse, refuseAction } from './refuse.js';

export type AuthRequestState = 'pending' | 'approved' | 'rejected';

export interface AuthRequestContext {
  id: string;
  name: string;
  type: string;
  wallet_address: string;
  agent_8004_id: string | null;
  created_at: string;
  updated_at: string;
  reviewed_by: string | null;
  reviewed_at: string | null;
  /** the identity approval created */
  identity_id: string | null;
}

export type AuthRequestEvent = { type: 'APPROVE'; now: number; by: string; identity_id: string } | { type: 'REJECT'; now: number; by: string };

const iso = (ms: number) => new Date(ms).toISOString();

export const authRequestMachine = setup({
  types: { context: {} as AuthRequestContext, events: {} as AuthRequestEvent },
  actions: {
    refuse: refuseAction,
    review: assign(({ event }) => ({
      reviewed_by: event.by,
      reviewed_at: iso(event.now),
      updated_at: iso(event.now),
      identity_id: event.type === 'APPROVE' ? event.identity_id : null,
    })),
  },
}).createMachine({
  id: 'auth-request',
  initial: 'pending',
  context: {} as AuthRequestContext,
  states: {
    pending: {
      on: {
        APPROVE: { target: 'approved', actions: 'review' },
        REJECT: { target: 'rejected', actions: 'review' },
      },
    },
    approved: {
      on: {
        APPROVE: { actions: refuse('AUTH_REQUEST_ALREADY_REVIEWED') },
        REJECT: { actions: refuse('AUTH_REQUEST_ALREADY_REVIEWED') },
      },
    },
    rejected: {
      on: {
        APPROVE: { actions: refuse('AUTH_REQUEST_ALREADY_REVIEWED') },
        REJECT: { actions: refuse('AUTH_REQUEST_ALREADY_REVIEWED') },
      },
    },
  },
});
