/**
 * An identity's membership of the org: its status (active, suspended, removed) and its claw type. Pure:
 * time arrives as `now`. The one-central-claw rule is a unique record derived from the state
 * (`src/org/memberships.ts`), written by the same commit.
 */
import { assign, setup } from 'xstate';
import { refuseAction } from './refuse.js';

export type MembershipStatus = 'active' | 'suspended' | 'removed';
export type ClawType = 'central' | 'worker' | 'observer';

export interface MembershipContext {
  id: string;
  identity_id: string;
  company_id: string;
  claw_type: ClawType | null;
  created_at: string;
  updated_at: string;
}

export type MembershipEvent =
  | { type: 'ACTIVATE'; now: number }
  | { type: 'SUSPEND'; now: number }
  | { type: 'REMOVE'; now: number }
  | { type: 'SET_CLAW_TYPE'; now: number; claw_type: ClawType };

const iso = (ms: number) => new Date(ms).toISOString();

export const membershipMachine = setup({
  types: { context: {} as MembershipContext, events: {} as MembershipEvent },
  actions: {
    refuse: refuseAction,
    touch: assign(({ event }) => ({ updated_at: iso(event.now) })),
    setClawType: assign(({ event }) => ({ claw_type: (event as Extract<MembershipEvent, { type: 'SET_CLAW_TYPE' }>).claw_type, updated_at: iso(event.now) })),
  },
  guards: {
    clawTypeChanges: ({ context, event }) => event.type === 'SET_CLAW_TYPE' && event.claw_type !== context.claw_type,
  },
}).createMachine({
  id: 'membership',
  initial: 'active',
  context: {} as MembershipContext,
  states: {
    active: {
      on: {
        SUSPEND: { target: 'suspended', actions: 'touch' },
        REMOVE: { target: 'removed', actions: 'touch' },
        SET_CLAW_TYPE: [{ guard: 'clawTypeChanges', target: 'active', actions: 'setClawType' }],
      },
    },
    suspended: {
      on: {
        ACTIVATE: { target: 'active', actions: 'touch' },
        REMOVE: { target: 'removed', actions: 'touch' },
        SET_CLAW_TYPE: [{ guard: 'clawTypeChanges', target: 'suspended', actions: 'setClawType' }],
      },
    },
    removed: {
      on: {
        ACTIVATE: { target: 'active', actions: 'touch' },
      },
    },
  },
});

export const MEMBERSHIP_STATUS_EVENT: Record<MembershipStatus, MembershipEvent['type']> = { active: 'ACTIVATE', suspended: 'SUSPEND', removed: 'REMOVE' };
