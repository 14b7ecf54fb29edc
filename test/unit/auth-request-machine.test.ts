import { readFileSync } from 'node:fs';
import { transition } from 'xstate';
import { describe, expect, it } from 'vitest';
import { authRequestMachine, type AuthRequestContext } from '../../actors/auth-request.js';
import { catalogue } from '../../src/errors.js';
import { docRows, machineRows } from '../helpers/state-table.js';

const ctx: AuthRequestContext = { id: 'r1', name: 'n', type: 'agent', wallet_address: '0x0', agent_8004_id: null, created_at: 'c', updated_at: 'c', reviewed_by: null, reviewed_at: null, identity_id: null };
const at = (value: string) => authRequestMachine.resolveState({ value, context: ctx });
const refusals = (actions: unknown[]) => (actions as { type: string; params?: { code: string } }[]).filter((a) => a.type === 'refuse').map((a) => a.params?.code);

describe('auth request machine', () => {
  it('docs/auth.md state table equals the machine, and its refusal codes are in the catalogue', () => {
    const doc = readFileSync(new URL('../../docs/auth.md', import.meta.url), 'utf8');
    const rows = machineRows(authRequestMachine);
    expect(docRows(doc, '### Auth request machine')).toEqual(rows);
    for (const code of rows.map((r) => r[5]).filter((c) => c !== '—')) expect(Object.keys(catalogue)).toContain(code);
  });

  it('approve stamps the reviewer, the time and the identity; reject leaves no identity', () => {
    const [approved] = transition(authRequestMachine, at('pending'), { type: 'APPROVE', now: 1000, by: 'admin', identity_id: 'i1' });
    expect(approved.value).toBe('approved');
    expect(approved.context).toMatchObject({ reviewed_by: 'admin', reviewed_at: new Date(1000).toISOString(), updated_at: new Date(1000).toISOString(), identity_id: 'i1' });
    const [rejected] = transition(authRequestMachine, at('pending'), { type: 'REJECT', now: 2000, by: 'admin' });
    expect(rejected.value).toBe('rejected');
    expect(rejected.context).toMatchObject({ reviewed_by: 'admin', identity_id: null });
  });

  it.each(['approved', 'rejected'])('a %s request refuses another review and stays as it was', (state) => {
    for (const event of [{ type: 'APPROVE' as const, now: 1, by: 'a', identity_id: 'x' }, { type: 'REJECT' as const, now: 1, by: 'a' }]) {
      const before = at(state);
      const [next, actions] = transition(authRequestMachine, before, event);
      expect(next.value).toBe(state);
      expect(next.context).toBe(before.context);
      expect(refusals(actions)).toEqual(['AUTH_REQUEST_ALREADY_REVIEWED']);
    }
  });
});
