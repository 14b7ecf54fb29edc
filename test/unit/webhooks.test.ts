/** The webhook pieces that need no server: the signature against `standardwebhooks`, the address guard, back-off and the retry window. */
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { transition } from 'xstate';
import { deliveryMachine, deliveryTimers, newDelivery, retryDelayMs } from '../../actors/webhook-delivery.js';
import { isPrivateAddress } from '../../src/webhooks/address.js';
import { newSecret, sign } from '../../src/webhooks/model.js';

describe('webhook signing', () => {
  it('verifies with the standardwebhooks package and fails on any change', () => {
    const secret = newSecret();
    const ts = Math.floor(Date.now() / 1000);
    const body = JSON.stringify({ type: 'signal.emitted', data: { x: 1 } });
    const headers = { 'webhook-id': 'whd_1', 'webhook-timestamp': String(ts), 'webhook-signature': sign(secret, 'whd_1', ts, body) };
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(secret).verify(body + ' ', headers)).toThrow();
    expect(() => new Webhook(newSecret()).verify(body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(body, { ...headers, 'webhook-id': 'whd_2' })).toThrow();
  });
});

describe('address guard', () => {
  it('private, loopback, link-local and mapped forms are refused; public addresses pass', () => {
    for (const a of ['127.0.0.1', '10.0.0.1', '172.16.5.4', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', '224.0.0.1', 'not-an-ip'])
      expect(isPrivateAddress(a), a).toBe(true);
    for (const a of ['1.1.1.1', '8.8.8.8', '172.32.0.1', '2606:4700:4700::1111', '::ffff:1.1.1.1']) expect(isPrivateAddress(a), a).toBe(false);
  });
});

describe('delivery back-off and retry window', () => {
  it('doubles from the base, capped at an hour', () => {
    expect([1, 2, 3, 4].map((n) => retryDelayMs(1000, n))).toEqual([1000, 2000, 4000, 8000]);
    expect(retryDelayMs(1000, 30)).toBe(3600_000);
  });

  it('retries while the next attempt fits the window, then fails; replay reopens it', () => {
    const t0 = 1_000_000;
    let s = deliveryMachine.resolveState(newDelivery({ id: 'd', webhook_id: 'w', event: 'signal.emitted', payload: {}, order: 'o', now: t0, retry_window_ms: 5000, backoff_base_ms: 1000, send_hold_ms: 3000 }) as any);
    const step = (e: any) => (s = transition(deliveryMachine, s, e)[0]);
    const fail = (now: number) => step({ type: 'RESULT', now, attempt: s.context.attempt_count, ok: false, response_code: 500, latency_ms: 1, error: 'HTTP 500' });
    let now = t0;
    for (const expected of ['scheduled', 'scheduled', 'failed']) {
      step({ type: 'SEND', now });
      expect(s.value).toBe('queued');
      step({ type: 'START', now });
      expect(s.value).toBe('sending');
      fail(now);
      expect(s.value).toBe(expected);
      if (s.context.next_attempt_at) now = s.context.next_attempt_at;
    }
    expect(s.context.attempts.map((a: any) => a.status)).toEqual(['failed', 'failed', 'failed']);
    // a stale result (an earlier attempt) changes nothing
    step({ type: 'REPLAY', now: now + 10 });
    expect(s.value).toBe('scheduled');
    step({ type: 'SEND', now: now + 10 });
    step({ type: 'START', now: now + 10 });
    const before = s;
    step({ type: 'RESULT', now: now + 11, attempt: 1, ok: true, response_code: 200, latency_ms: 1, error: null });
    expect(s).toBe(before);
    step({ type: 'RESULT', now: now + 12, attempt: 4, ok: true, response_code: 200, latency_ms: 1, error: null });
    expect(s.value).toBe('delivered');
  });

  it('fencing by attempt: a sender whose attempt timed out and was taken up again cannot record its late result', () => {
    const t0 = 1_000_000;
    let s = deliveryMachine.resolveState(newDelivery({ id: 'd', webhook_id: 'w', event: 'signal.emitted', payload: {}, order: 'o', now: t0, retry_window_ms: 60_000, backoff_base_ms: 1000, send_hold_ms: 3000 }) as any);
    const step = (e: any) => (s = transition(deliveryMachine, s, e)[0]);
    const late = { type: 'RESULT', attempt: 1, ok: true, response_code: 200, latency_ms: 1, error: null };
    step({ type: 'SEND', now: t0 });
    step({ type: 'START', now: t0 });
    step({ type: 'SEND_TIMEOUT', now: t0 + 3000 }); // the first sender's lease (send_hold_ms) lapsed
    expect(s.value).toBe('scheduled');
    const waiting = s;
    step({ ...late, now: t0 + 3500 });
    expect(s).toBe(waiting);
    step({ type: 'SEND', now: s.context.next_attempt_at });
    step({ type: 'START', now: s.context.queued_since });
    expect(s.context).toMatchObject({ attempt_count: 2 });
    const second = s;
    step({ ...late, now: t0 + 4500 });
    expect(s).toBe(second);
    step({ type: 'RESULT', now: t0 + 4600, attempt: 2, ok: false, response_code: 500, latency_ms: 1, error: 'HTTP 500' });
    expect(s.value).toBe('scheduled');
    expect(s.context.attempts.map((a: any) => [a.attempt, a.status, a.error])).toEqual([[1, 'failed', 'no result: the sender stopped mid-attempt'], [2, 'failed', 'HTTP 500']]);
  });

  it('waiting in the queue is no attempt: queued again when nobody started it, timed from START, its wait added to the window', () => {
    const t0 = 1_000_000;
    let s = deliveryMachine.resolveState(newDelivery({ id: 'd', webhook_id: 'w', event: 'signal.emitted', payload: {}, order: 'o', now: t0, retry_window_ms: 5000, backoff_base_ms: 1000, send_hold_ms: 3000 }) as any);
    const step = (e: any) => (s = transition(deliveryMachine, s, e)[0]);
    step({ type: 'SEND', now: t0 });
    expect(deliveryTimers(s.value as string, s.context)).toEqual([{ event: 'REQUEUE', at: t0 + 3000 }]);
    // a sending timer cannot fire on a queued delivery, and a REQUEUE before its time changes nothing
    const queued = s;
    step({ type: 'SEND_TIMEOUT', now: t0 + 9000 });
    step({ type: 'REQUEUE', now: t0 + 2999 });
    expect(s).toBe(queued);
    // 7 s in the queue (queued again twice), longer than the retry window: no attempt recorded, none counted
    step({ type: 'REQUEUE', now: t0 + 3000 });
    step({ type: 'REQUEUE', now: t0 + 6000 });
    expect(s.value).toBe('queued');
    expect(s.context).toMatchObject({ attempt_count: 0, attempts: [], requeue_at: t0 + 9000 });
    // a replay is refused as for an attempt in flight: the delivery is about to be sent
    const [, actions] = transition(deliveryMachine, s, { type: 'REPLAY', now: t0 + 6500 } as any);
    expect(actions.filter((x: any) => x.type === 'refuse').map((x: any) => x.params.code)).toEqual(['WEBHOOK_DELIVERY_IN_PROGRESS']);
    step({ type: 'START', now: t0 + 7000 });
    expect(s.value).toBe('sending');
    expect(s.context).toMatchObject({ attempt_count: 1, sending_since: t0 + 7000, deadline_at: t0 + 5000 + 7000, queued_since: null, requeue_at: null });
    expect(deliveryTimers(s.value as string, s.context)).toEqual([{ event: 'SEND_TIMEOUT', at: t0 + 10_000 }]);
    // a second entry for the same attempt finds it started: START has no move in `sending`
    const sending = s;
    step({ type: 'START', now: t0 + 7001 });
    expect(s).toBe(sending);
    // its failure still fits the moved window: retried, not failed
    step({ type: 'RESULT', now: t0 + 7500, attempt: 1, ok: false, response_code: 500, latency_ms: 500, error: 'HTTP 500' });
    expect(s.value).toBe('scheduled');
    expect(s.context.attempts.map((a: any) => [a.attempt, a.status])).toEqual([[1, 'failed']]);
  });
});
