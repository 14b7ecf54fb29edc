/**
 * Inbox receipts over real HTTP, on both backends: acknowledge, resolve, snooze and unsnooze with their
 * answers, refused moves, one identity's receipt never changing another's, a snooze ending by itself, and
 * a snooze ending across a killed and restarted server (durable timer).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, spawnServer, type ChildServer } from '../helpers/server.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';
const RECEIPT_KEYS = ['ack_due_at', 'ack_overdue', 'ack_required', 'acknowledged_at', 'identity_id', 'resolved_at', 'signal_id', 'snoozed_until', 'state', 'updated_at'];
const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();

/** The item for one signal in the member's own inbox, or undefined when the inbox does not show it. */
async function item(m: Member, signalId: string, query = ''): Promise<any | undefined> {
  const r = await m.client.get(`/inbox/identity/${m.id}?limit=100${query}`);
  return expectOk(r).signals.find((s: any) => s.id === signalId);
}

describe.each(BACKENDS)('inbox receipts on %s', (backend) => {
  const servers = serversOn(backend);

  describe('one server', () => {
    let svc: Service;
    let root: Member;
    let a: Member;
    let b: Member;

    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
      a = await join(root.client, 'recv-a');
      b = await join(root.client, 'recv-b');
      const role = (await root.client.post('/roles', { name: 'pair' })).body.data;
      for (const m of [a, b]) expect((await root.client.post('/fills', { identity_id: m.id, role_id: role.id })).status).toBe(201);
    });
    afterAll(async () => {
      await svc?.close();
    });

    const emitTo = async (m: Member, content = 'for you') => (await emitOk(root, { signal_type: 'pulse', content, to_identity: m.id })).id as string;

    it('acknowledge answers the receipt and the inbox shows it acknowledged', async () => {
      const id = await emitTo(a);
      expect((await item(a, id)).receipt_state).toBe('unread');
      const t0 = Date.now();
      const r = expectOk(await a.client.post('/inbox/acknowledge', { signal_id: id }));
      expect(Object.keys(r).sort()).toEqual(RECEIPT_KEYS);
      expect(r).toMatchObject({ signal_id: id, identity_id: a.id, state: 'acknowledged', snoozed_until: null, resolved_at: null });
      expect(Date.parse(r.acknowledged_at)).toBeGreaterThanOrEqual(t0 - 1000);
      expect(r.updated_at).toBe(r.acknowledged_at);
      expect(await item(a, id)).toMatchObject({ receipt_state: 'acknowledged', snoozed_until: null });
    });

    it('resolve answers the receipt, hides the item by default and shows it with include_resolved', async () => {
      const id = await emitTo(a);
      expectOk(await a.client.post('/inbox/acknowledge', { signal_id: id }));
      const r = expectOk(await a.client.post('/inbox/resolve', { signal_id: id }));
      expect(Object.keys(r).sort()).toEqual(RECEIPT_KEYS);
      expect(r).toMatchObject({ signal_id: id, identity_id: a.id, state: 'resolved', snoozed_until: null });
      expect(typeof r.acknowledged_at).toBe('string');
      expect(Date.parse(r.resolved_at)).toBeGreaterThanOrEqual(Date.parse(r.acknowledged_at));
      expect(await item(a, id)).toBeUndefined();
      expect(await item(a, id, '&include_resolved=true')).toMatchObject({ receipt_state: 'resolved' });
      // straight from unread, too
      const direct = await emitTo(a);
      expect(expectOk(await a.client.post('/inbox/resolve', { signal_id: direct }))).toMatchObject({ state: 'resolved', acknowledged_at: null });
    });

    it('snooze hides the item until then; unsnooze returns it to the state it was in', async () => {
      const id = await emitTo(a);
      const until = inAnHour();
      const s = expectOk(await a.client.post('/inbox/snooze', { signal_id: id, until }));
      expect(Object.keys(s).sort()).toEqual(RECEIPT_KEYS);
      expect(s).toMatchObject({ signal_id: id, identity_id: a.id, state: 'snoozed', snoozed_until: until, acknowledged_at: null, resolved_at: null });
      expect(await item(a, id)).toBeUndefined();
      expect(await item(a, id, '&include_snoozed=true')).toMatchObject({ receipt_state: 'snoozed', snoozed_until: until });

      // snoozing again moves the deadline
      const later = new Date(Date.now() + 7_200_000).toISOString();
      expect(expectOk(await a.client.post('/inbox/snooze', { signal_id: id, until: later })).snoozed_until).toBe(later);

      const u = expectOk(await a.client.post('/inbox/unsnooze', { signal_id: id }));
      expect(u).toMatchObject({ signal_id: id, identity_id: a.id, state: 'unread', snoozed_until: null });
      expect(await item(a, id)).toMatchObject({ receipt_state: 'unread', snoozed_until: null });

      // an acknowledged item snoozed and unsnoozed comes back acknowledged
      expectOk(await a.client.post('/inbox/acknowledge', { signal_id: id }));
      expect(expectOk(await a.client.post('/inbox/snooze', { signal_id: id, until: inAnHour() })).state).toBe('snoozed');
      expect(expectOk(await a.client.post('/inbox/unsnooze', { signal_id: id }))).toMatchObject({ state: 'acknowledged', snoozed_until: null });
      // a snoozed item can be acknowledged or resolved directly
      expect(expectOk(await a.client.post('/inbox/snooze', { signal_id: id, until: inAnHour() })).state).toBe('snoozed');
      expect(expectOk(await a.client.post('/inbox/resolve', { signal_id: id }))).toMatchObject({ state: 'resolved', snoozed_until: null });
      const other = await emitTo(a);
      expectOk(await a.client.post('/inbox/snooze', { signal_id: other, until: inAnHour() }));
      expect(expectOk(await a.client.post('/inbox/acknowledge', { signal_id: other }))).toMatchObject({ state: 'acknowledged', snoozed_until: null });
    });

    it('refuses invalid moves with 422 SIGNAL_DELIVERY_INVALID_TRANSITION and changes nothing', async () => {
      const unread = await emitTo(a);
      expectError(await a.client.post('/inbox/unsnooze', { signal_id: unread }), 422, 'SIGNAL_DELIVERY_INVALID_TRANSITION');
      expect(await item(a, unread)).toMatchObject({ receipt_state: 'unread' });

      const acked = await emitTo(a);
      expectOk(await a.client.post('/inbox/acknowledge', { signal_id: acked }));
      expectError(await a.client.post('/inbox/acknowledge', { signal_id: acked }), 422, 'SIGNAL_DELIVERY_INVALID_TRANSITION');
      expectError(await a.client.post('/inbox/unsnooze', { signal_id: acked }), 422, 'SIGNAL_DELIVERY_INVALID_TRANSITION');
      expect(await item(a, acked)).toMatchObject({ receipt_state: 'acknowledged' });

      const resolved = await emitTo(a);
      expectOk(await a.client.post('/inbox/resolve', { signal_id: resolved }));
      for (const [path, body] of [
        ['/inbox/acknowledge', {}],
        ['/inbox/resolve', {}],
        ['/inbox/snooze', { until: inAnHour() }],
        ['/inbox/unsnooze', {}],
      ] as const) {
        expectError(await a.client.post(path, { signal_id: resolved, ...body }), 422, 'SIGNAL_DELIVERY_INVALID_TRANSITION');
      }
      expect(await item(a, resolved, '&include_resolved=true')).toMatchObject({ receipt_state: 'resolved', snoozed_until: null });
    });

    it('refuses a snooze until in the past, or not a date-time, with 400; bad bodies and unknown signals', async () => {
      const id = await emitTo(a);
      const past = new Date(Date.now() - 60_000).toISOString();
      expectError(await a.client.post('/inbox/snooze', { signal_id: id, until: past }), 400, 'VALIDATION_INVALID_TYPE', 'until');
      expectError(await a.client.post('/inbox/snooze', { signal_id: id, until: 'tomorrow' }), 400, 'VALIDATION_INVALID_TYPE', 'until');
      expectError(await a.client.post('/inbox/snooze', { signal_id: id, until: 1234567890 }), 400, 'VALIDATION_INVALID_TYPE', 'until');
      expectError(await a.client.post('/inbox/snooze', { signal_id: id }), 400, 'VALIDATION_FIELD_REQUIRED', 'until');
      expect(await item(a, id)).toMatchObject({ receipt_state: 'unread', snoozed_until: null });

      for (const path of ['/inbox/acknowledge', '/inbox/resolve', '/inbox/unsnooze']) {
        expectError(await a.client.post(path, {}), 400, 'VALIDATION_FIELD_REQUIRED', 'signal_id');
        expectError(await a.client.post(path, { signal_id: 5 }), 400, 'VALIDATION_INVALID_TYPE', 'signal_id');
        expectError(await a.client.post(path, { signal_id: UNKNOWN }), 404, 'SIGNAL_NOT_FOUND');
        expectError(await new Client(svc.url).post(path, { signal_id: id }), 401, 'AUTH_KEY_MISSING');
      }
      expectError(await a.client.post('/inbox/snooze', { signal_id: UNKNOWN, until: inAnHour() }), 404, 'SIGNAL_NOT_FOUND');
    });

    it("one identity's receipt never changes another's", async () => {
      const r = await root.client.post('/emit', { signal_type: 'alert', content: 'for the pair', to_role: 'pair' });
      const id = r.body.data.id;
      expect((await item(a, id)).receipt_state).toBe('unread');
      expect((await item(b, id)).receipt_state).toBe('unread');

      expect(expectOk(await a.client.post('/inbox/resolve', { signal_id: id }))).toMatchObject({ identity_id: a.id, state: 'resolved' });
      expect(await item(a, id)).toBeUndefined();
      expect(await item(b, id)).toMatchObject({ receipt_state: 'unread', snoozed_until: null });

      expect(expectOk(await b.client.post('/inbox/snooze', { signal_id: id, until: inAnHour() }))).toMatchObject({ identity_id: b.id, state: 'snoozed' });
      expect(await item(a, id, '&include_resolved=true&include_snoozed=true')).toMatchObject({ receipt_state: 'resolved', snoozed_until: null });
      expect(expectOk(await b.client.post('/inbox/acknowledge', { signal_id: id }))).toMatchObject({ identity_id: b.id, state: 'acknowledged' });
      // a's resolve did not block b; b's moves did not touch a
      expect(await item(b, id)).toMatchObject({ receipt_state: 'acknowledged' });
      expect(await item(a, id, '&include_resolved=true')).toMatchObject({ receipt_state: 'resolved' });
      // the role inbox shows each reader their own receipt
      const roleA = expectOk(await a.client.get('/inbox/pair?include_resolved=true')).signals.find((s: any) => s.id === id);
      const roleB = expectOk(await b.client.get('/inbox/pair')).signals.find((s: any) => s.id === id);
      expect([roleA.receipt_state, roleB.receipt_state]).toEqual(['resolved', 'acknowledged']);
    });

    /** While the snooze surely still runs (the read answered before until), the item is hidden. */
    async function expectHiddenBefore(id: string, until: number) {
      const seen = await item(b, id);
      if (Date.now() < until) expect(seen).toBeUndefined();
    }

    it('a snooze ends by itself at until', async () => {
      const id = await emitTo(b);
      expectOk(await b.client.post('/inbox/acknowledge', { signal_id: id }));
      const until = new Date(Date.now() + 300).toISOString();
      expect(expectOk(await b.client.post('/inbox/snooze', { signal_id: id, until })).state).toBe('snoozed');
      await expectHiddenBefore(id, Date.parse(until));
      const back = await waitFor('the snooze to end', () => item(b, id), (x) => x !== undefined, 5000);
      expect(back).toMatchObject({ receipt_state: 'acknowledged', snoozed_until: null });
      expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(until));

      const id2 = await emitTo(b);
      const until2 = Date.now() + 300;
      expect(expectOk(await b.client.post('/inbox/snooze', { signal_id: id2, until: new Date(until2).toISOString() })).state).toBe('snoozed');
      await expectHiddenBefore(id2, until2);
      const back2 = await waitFor('the second snooze to end', () => item(b, id2), (x) => x !== undefined, 5000);
      expect(back2).toMatchObject({ receipt_state: 'unread', snoozed_until: null });
    });
  });

  describe('across a restart', () => {
    let child: ChildServer | undefined;
    afterAll(async () => {
      await child?.stop('SIGKILL');
    });

    it('a snooze ends after the server was killed and started again on the same data', async () => {
      const env = await servers.env();
      child = await spawnServer(env);
      const root = await bootstrap(child.url);
      const m = await join(root.client, 'sleeper');
      const emitted = await root.client.post('/emit', { signal_type: 'pulse', content: 'wake me', to_identity: m.id });
      expect(emitted.status).toBe(201);
      const id = emitted.body.data.id;
      const until = Date.now() + 1500;
      expectOk(await m.client.post('/inbox/snooze', { signal_id: id, until: new Date(until).toISOString() }));
      expect(await item(m, id)).toBeUndefined();
      // the kill must land before the timer is due, or this would not test the restart
      expect(Date.now(), 'setup took too long: the snooze was already due before the kill').toBeLessThan(until - 300);
      await child.stop('SIGKILL');

      child = await spawnServer(env);
      const again: Member = { ...m, client: new Client(child.url, m.key) };
      const back = await waitFor('the snooze to end after the restart', () => item(again, id), (x) => x !== undefined, 5000);
      expect(back).toMatchObject({ id, receipt_state: 'unread', snoozed_until: null, content: 'wake me' });
    });
  });
});
