/** The peer machine's trust: ESTABLISH issues it (a pending peer becomes active), the derived expiry timer, TRUST_EXPIRE only once due. */
import { describe, expect, it } from 'vitest';
import { newPeer, newTrustedPeer, peerMachine, peerTimers, trustExpired, type PeerContext } from '../../actors/peer.js';
import { iso, runMachine, T0 } from '../helpers/machine.js';

const fields = { id: 'p1', name: 'Peer', endpoint: 'https://p.example', allowed_scopes: ['task'], created_by: 'root', created_at: iso(T0) };
const trust = { shared_secret: 'a'.repeat(64), expires_at: iso(T0 + 60_000) };
const step = (value: string, context: PeerContext, event: { type: string } & Record<string, unknown>) => runMachine(peerMachine, value, context, event);

describe('peer machine: trust', () => {
  it('ESTABLISH on a pending peer records the trust and activates it; the expiry timer follows', () => {
    const pending = newPeer(fields);
    expect(peerTimers(pending.context)).toEqual([]);
    const r = step('pending', pending.context, { type: 'ESTABLISH', now: T0, by: 'root', ...trust });
    expect(r.value).toBe('active');
    expect(r.context).toMatchObject({ has_trust: true, trust_expired: false, ...trust, establish_requested_by: 'root' });
    expect(peerTimers(r.context)).toEqual([{ event: 'TRUST_EXPIRE', at: T0 + 60_000 }]);
  });

  it('ESTABLISH without a secret or with a bad expiry takes no transition; a suspended peer cannot establish', () => {
    const pending = newPeer(fields).context;
    expect(step('pending', pending, { type: 'ESTABLISH', now: T0, by: 'root', shared_secret: '', expires_at: trust.expires_at }).unchanged).toBe(true);
    expect(step('pending', pending, { type: 'ESTABLISH', now: T0, by: 'root', shared_secret: 'x', expires_at: 'soon' }).unchanged).toBe(true);
    expect(step('suspended', pending, { type: 'ESTABLISH', now: T0, by: 'root', ...trust }).unchanged).toBe(true);
  });

  it('TRUST_EXPIRE marks the trust expired only once due; has_trust stays and the timer is gone', () => {
    const live = newTrustedPeer(fields, trust);
    expect(live.value).toBe('active');
    expect(step('active', live.context, { type: 'TRUST_EXPIRE', now: T0 + 59_999 }).unchanged).toBe(true);
    const r = step('active', live.context, { type: 'TRUST_EXPIRE', now: T0 + 60_000 });
    expect(r.context).toMatchObject({ has_trust: true, trust_expired: true });
    expect(peerTimers(r.context)).toEqual([]);
    expect(trustExpired(live.context, T0 + 60_000)).toBe(true);
    expect(trustExpired(live.context, T0 + 1)).toBe(false);
    // a new trust clears the expiry
    const again = step('active', r.context, { type: 'ESTABLISH', now: T0 + 70_000, by: 'root', shared_secret: 'b'.repeat(64), expires_at: iso(T0 + 200_000) });
    expect(again.context).toMatchObject({ trust_expired: false, shared_secret: 'b'.repeat(64) });
  });
});

describe('peer machine: limits', () => {
  it('SET_LIMITS sets the fields it names and leaves the state; null goes back to the default; a revoked peer refuses it', () => {
    const peer = newTrustedPeer(fields, trust);
    expect(peer.context).toMatchObject({ rate_limit: null, storage_quota_bytes: null });
    const r = step('active', peer.context, { type: 'SET_LIMITS', now: T0 + 5, rate_limit: 10 });
    expect(r.value).toBe('active');
    expect(r.context).toMatchObject({ rate_limit: 10, storage_quota_bytes: null, updated_at: iso(T0 + 5) });
    const q = step('suspended', r.context, { type: 'SET_LIMITS', now: T0 + 6, storage_quota_bytes: 0, rate_limit: null });
    expect(q.value).toBe('suspended');
    expect(q.context).toMatchObject({ rate_limit: null, storage_quota_bytes: 0 });
    expect(step('revoked', q.context, { type: 'SET_LIMITS', now: T0 + 7, rate_limit: 1 }).unchanged).toBe(true);
  });
});
