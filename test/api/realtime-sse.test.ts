/**
 * The SSE stream at /signals/stream over the real `eventsource` client, on both backends: an admin stream
 * sees every signal, another identity's stream only what lands in its inboxes (narrowed by its key's
 * scopes), ring and type filters, resume by `last_event_id` and by the client's own reconnect with
 * Last-Event-ID after a dropped connection, auth errors answered as JSON before the stream starts, and the
 * heartbeat comment.
 */
import { connect } from 'node:net';
import { EventSource } from 'eventsource';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { expectExactlyOnce, pool, Relay, SseStream, waitFor } from '../helpers/push.js';
import { CORE_BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError } from './support.js';

/** SSE ids are the journal cursors: decimal strings, increasing along the stream. */
function expectIncreasingIds(ids: string[], label: string): void {
  for (const id of ids) expect(id, label).toMatch(/^\d+$/);
  for (let i = 1; i < ids.length; i++) {
    if (!(BigInt(ids[i]) > BigInt(ids[i - 1]))) throw new Error(`${label}: event id ${ids[i]} (event ${i}) does not follow ${ids[i - 1]}`);
  }
}

async function fetchJson(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any; type: string | null }> {
  const r = await fetch(url, { headers });
  const type = r.headers.get('content-type');
  const text = await r.text();
  return { status: r.status, body: JSON.parse(text), type };
}

describe.each(CORE_BACKENDS)('SSE stream on %s', (backend) => {
  const servers = serversOn(backend);
  let streams: SseStream[] = [];
  let svc: Service;
  let root: Member;
  /** fills builders */
  let b1: Member;
  /** member of ring core */
  let c1: Member;
  /** member of ring edge */
  let e1: Member;

  async function stream(url: string, params: Record<string, string>, label: string): Promise<SseStream> {
    const s = await SseStream.open(url, params, label);
    streams.push(s);
    return s;
  }

  /** A broadcast sentinel every unfiltered stream receives; events follow commit order, so once a stream has it, it has been offered everything before it. */
  async function settle(ss: SseStream[], body: Record<string, unknown> = {}): Promise<string> {
    const s = await emitOk(root, { signal_type: 'pulse', content: 'sentinel', ...body });
    for (const x of ss) await x.waitSignals([s.id]);
    return s.id;
  }

  beforeAll(async () => {
    svc = await servers.start({ SSE_HEARTBEAT_MS: '100' });
    root = await bootstrap(svc.url);
    b1 = await join(root.client, 'b1');
    c1 = await join(root.client, 'c1');
    e1 = await join(root.client, 'e1');
    const role = await root.client.post('/roles', { name: 'builders' });
    expect(role.status).toBe(201);
    expect((await root.client.post('/fills', { identity_id: b1.id, role_id: role.body.data.id })).status).toBe(201);
    expect((await root.client.post('/rings', { name: 'core', members: [c1.id] })).status).toBe(201);
    expect((await root.client.post('/rings', { name: 'edge', members: [e1.id] })).status).toBe(201);
  });
  afterEach(() => {
    for (const s of streams) s.close();
    streams = [];
  });
  afterAll(() => {
    for (const s of streams) s.close();
  });

  it('an admin stream sees every signal, with the Signal as data and the cursor as id', async () => {
    const admin = await stream(svc.url, { token: root.key }, 'admin');
    const sent = [
      await emitOk(b1, { signal_type: 'pulse', content: 'b1 to c1', to_identity: c1.id }),
      await emitOk(c1, { signal_type: 'alert', content: 'c1 to builders', to_role: 'builders' }),
      await emitOk(e1, { signal_type: 'sense', content: 'e1 to edge', to_ring: 'edge' }),
      await emitOk(b1, { signal_type: 'task', content: 'b1 to everyone' }),
    ];
    const s = await settle([admin]);
    expectExactlyOnce(admin.signalIds(), [...sent.map((x) => x.id), s], 'admin');
    expectIncreasingIds(admin.events.map((e) => e.id), 'admin');
    const ev = admin.events.find((e) => e.type === 'signal' && e.signal.id === sent[0].id)!;
    expect(ev.signal).toMatchObject({ id: sent[0].id, signal_type: 'pulse', content: 'b1 to c1', from_identity: b1.id, to_identity: c1.id, delivery_state: 'pending', protocol_version: 'svc/1.0' });
  });

  it("a non-admin stream sees only what lands in its identity's inboxes, narrowed by its key's scopes", async () => {
    const mine = await stream(svc.url, { token: c1.key }, 'c1');
    const direct = await emitOk(b1, { signal_type: 'pulse', content: 'to c1', to_identity: c1.id });
    await emitOk(b1, { signal_type: 'pulse', content: 'to e1', to_identity: e1.id });
    await emitOk(root, { signal_type: 'alert', content: 'to builders', to_role: 'builders' });
    const ring = await emitOk(root, { signal_type: 'alert', content: 'to core', to_ring: 'core' });
    await emitOk(root, { signal_type: 'alert', content: 'to edge', to_ring: 'edge' });
    const all = await emitOk(e1, { signal_type: 'query', content: 'anyone?' });
    const s = await settle([mine]);
    expectExactlyOnce(mine.signalIds(), [direct.id, ring.id, all.id, s], 'c1');

    // a key limited to alerts sees only alerts of the same inbox
    const made = await root.client.post('/admin/api-keys', { owner: c1.id, permissions: { signal_types: ['alert'] } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const scoped = await stream(svc.url, { token: made.body.data.api_key }, 'c1 alerts only');
    const p = await emitOk(root, { signal_type: 'pulse', content: 'pulse to c1', to_identity: c1.id });
    const a = await emitOk(root, { signal_type: 'alert', content: 'alert to c1', to_identity: c1.id });
    const s2 = await settle([scoped], { signal_type: 'alert', to_ring: 'core' });
    expectExactlyOnce(scoped.signalIds(), [a.id, s2], 'c1 alerts only');
    expect(scoped.signalIds()).not.toContain(p.id);
  });

  it('ring and type filters narrow a stream (comma lists), alone and together', async () => {
    const rings = await stream(svc.url, { token: root.key, ring: 'core,edge' }, 'ring=core,edge');
    const core = await stream(svc.url, { token: root.key, ring: 'core' }, 'ring=core');
    const types = await stream(svc.url, { token: root.key, type: 'alert, task' }, 'type=alert,task');
    const both = await stream(svc.url, { token: root.key, ring: 'core', type: 'alert' }, 'ring=core&type=alert');
    const mineCore = await stream(svc.url, { token: c1.key, ring: 'core', type: 'alert' }, 'c1 ring=core&type=alert');
    const coreAlert = await emitOk(root, { signal_type: 'alert', content: 'core alert', to_ring: 'core' });
    const corePulse = await emitOk(root, { signal_type: 'pulse', content: 'core pulse', to_ring: 'core' });
    const edgeTask = await emitOk(root, { signal_type: 'task', content: 'edge task', to_ring: 'edge' });
    const directAlert = await emitOk(root, { signal_type: 'alert', content: 'direct alert', to_identity: c1.id });
    const plain = await emitOk(root, { signal_type: 'pulse', content: 'no ring' });
    const s = await emitOk(root, { signal_type: 'alert', content: 'sentinel', to_ring: 'core' });
    for (const x of [rings, core, types, both, mineCore]) await x.waitSignals([s.id]);
    expectExactlyOnce(rings.signalIds(), [coreAlert.id, corePulse.id, edgeTask.id, s.id], rings.label);
    expectExactlyOnce(core.signalIds(), [coreAlert.id, corePulse.id, s.id], core.label);
    expectExactlyOnce(types.signalIds(), [coreAlert.id, edgeTask.id, directAlert.id, s.id], types.label);
    expectExactlyOnce(both.signalIds(), [coreAlert.id, s.id], both.label);
    expectExactlyOnce(mineCore.signalIds(), [coreAlert.id, s.id], mineCore.label);
    expect(types.signalIds()).not.toContain(plain.id);
  });

  it('resumes after last_event_id with no gap and no duplicate across a burst', async () => {
    const BURST = 200;
    const first = await stream(svc.url, { token: root.key, type: 'sense' }, 'first');
    let firstClosed = false;
    let lastId = '';
    let before: string[] = [];
    const closing = (async () => {
      await waitFor(() => first.signalIds().length >= 60, 10_000, 'first stream to see 60 events');
      first.close();
      // what this client processed: everything it had when it closed
      before = first.signalIds();
      lastId = first.events[first.events.length - 1].id;
      firstClosed = true;
    })();
    const ids = await pool(BURST, 8, async (i) => {
      if (i >= 120) await waitFor(() => firstClosed, 10_000, 'first stream to close');
      return (await emitOk(root, { signal_type: 'sense', content: `burst ${i}`, to_identity: c1.id })).id as string;
    });
    await closing;
    expect(before.length).toBeLessThan(BURST);
    const second = await stream(svc.url, { token: root.key, type: 'sense', last_event_id: lastId }, 'second');
    await second.waitSignals(ids.filter((id) => !before.includes(id)), 10_000);
    const live = await emitOk(root, { signal_type: 'sense', content: 'live after resume', to_identity: c1.id });
    await second.waitSignals([live.id]);
    expectExactlyOnce([...before, ...second.signalIds()], [...ids, live.id], 'first then second');
    expect(BigInt(second.events[0].id)).toBeGreaterThan(BigInt(lastId));
    expectIncreasingIds(second.events.map((e) => e.id), 'second');
  });

  it("the client's own reconnect sends Last-Event-ID and misses nothing signalled while it was away", async () => {
    const relay = await Relay.start(svc.port);
    try {
      const es = await stream(relay.url, { token: root.key, type: 'shift' }, 'reconnecting');
      const part1 = await pool(40, 4, async (i) => (await emitOk(root, { signal_type: 'shift', content: `before ${i}` })).id as string);
      await es.waitSignals(part1);
      // the connection drops; the client's retry is held until part 2 is committed, so part 2 can only
      // reach it through the Last-Event-ID replay
      relay.cut();
      await waitFor(() => es.errors > 0, 5000, 'the stream to notice the disconnect');
      const part2 = await pool(40, 4, async (i) => (await emitOk(root, { signal_type: 'shift', content: `while away ${i}` })).id as string);
      relay.release();
      await es.waitSignals(part2, 10_000);
      expect(es.opens).toBe(2);
      expect(es.es.readyState).toBe(EventSource.OPEN);
      const part3 = await pool(10, 4, async (i) => (await emitOk(root, { signal_type: 'shift', content: `after ${i}` })).id as string);
      await es.waitSignals(part3);
      expectExactlyOnce(es.signalIds(), [...part1, ...part2, ...part3], 'across the reconnect');
      expectIncreasingIds(es.events.map((e) => e.id), 'across the reconnect');
    } finally {
      await relay.stop();
    }
  });

  it('answers auth failures as a JSON 401 before the stream starts', async () => {
    const base = `${svc.url}/signals/stream`;
    const missing = await fetchJson(base);
    expect(missing.type).toMatch(/application\/json/);
    expectError(missing, 401, 'AUTH_KEY_MISSING');
    // a Bearer header is not how this route takes its key
    expectError(await fetchJson(base, { authorization: `Bearer ${root.key}` }), 401, 'AUTH_KEY_MISSING');
    const invalid = await fetchJson(`${base}?token=svc_not_a_key`);
    expect(invalid.type).toMatch(/application\/json/);
    expectError(invalid, 401, 'AUTH_KEY_INVALID');

    const made = await root.client.post('/admin/api-keys', { owner: c1.id });
    expect((await root.client.post(`/admin/api-keys/${made.body.data.id}/revoke`)).status).toBe(200);
    expectError(await fetchJson(`${base}?token=${made.body.data.api_key}`), 401, 'AUTH_KEY_REVOKED');
    expectError(await fetchJson(`${base}?token=${c1.key}&last_event_id=nope`), 400, 'VALIDATION_INVALID_TYPE', 'last_event_id');

    // the EventSource client gives up on a non-stream answer
    const es = new EventSource(`${base}?token=svc_not_a_key`);
    try {
      await waitFor(() => es.readyState === EventSource.CLOSED, 5000, 'EventSource to fail');
    } finally {
      es.close();
    }
  });

  it('sends a heartbeat comment every SSE_HEARTBEAT_MS', async () => {
    const ctrl = new AbortController();
    const r = await fetch(`${svc.url}/signals/stream?token=${c1.key}`, { signal: ctrl.signal });
    try {
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const reader = r.body!.getReader();
      const dec = new TextDecoder();
      let text = '';
      const heartbeats = () => text.split('\n').filter((l) => l.startsWith(':') && !l.startsWith(': cursor'));
      const timeout = setTimeout(() => ctrl.abort(), 5000);
      try {
        while (heartbeats().length < 2) {
          const { value, done } = await reader.read();
          if (done) throw new Error(`stream ended early: ${JSON.stringify(text)}`);
          text += dec.decode(value, { stream: true });
        }
      } catch (e) {
        throw new Error(`no two heartbeat comments within 5 s (${String(e)}); stream so far: ${JSON.stringify(text)}`);
      } finally {
        clearTimeout(timeout);
      }
      expect(text).toMatch(/^retry: \d+\n/);
      expect(heartbeats()[0]).toBe(': heartbeat');
    } finally {
      ctrl.abort();
    }
  });

  /**
   * A reader that stops reading: once the stream's backlog passes PUSH_MAX_BUFFER_BYTES its events wait,
   * and when it makes no room for PUSH_DRAIN_TIMEOUT_MS the stream is ended; what it did receive ends on a
   * whole event, and resuming from that event's id gets the rest.
   */
  describe('a reader that does not read', () => {
    let slow: Service;
    let admin: Member;

    beforeAll(async () => {
      slow = await servers.start({ PUSH_MAX_BUFFER_BYTES: '65536', PUSH_DRAIN_TIMEOUT_MS: '1500' });
      admin = await bootstrap(slow.url);
    });

    it('is ended at PUSH_MAX_BUFFER_BYTES and resumes from its last whole event', async () => {
      const sock = connect(slow.port, '127.0.0.1');
      let raw = '';
      let ended = false;
      sock.setEncoding('utf8');
      sock.on('data', (d: string) => (raw += d));
      sock.on('close', () => (ended = true));
      sock.on('error', () => undefined);
      await new Promise<void>((resolve) => sock.once('connect', () => resolve()));
      const attached = slow.realtime.hub.positions().length;
      sock.write(`GET /signals/stream?token=${admin.key}&type=bulk HTTP/1.1\r\nHost: test\r\n\r\n`);
      await waitFor(() => raw.includes(': cursor'), 5000, 'the stream to start');
      await waitFor(() => slow.realtime.hub.positions().length === attached + 1, 5000, 'the stream to attach');
      sock.pause();
      const big = 'y'.repeat(40 * 1024);
      const ids = await pool(200, 4, async (i) => (await emitOk(admin, { signal_type: 'bulk', content: `${i} ${big}` })).id as string);
      await waitFor(() => slow.realtime.hub.positions().length === attached, 15_000, 'the server to end the stream');
      sock.resume();
      await waitFor(() => ended, 10_000, 'the connection to close');
      const events = [...raw.matchAll(/id: (\d+)\nevent: signal\ndata: (.*)\n\n/g)].map((m) => ({ id: m[1], signal: JSON.parse(m[2]) }));
      expect(events.length).toBeGreaterThan(0);
      expect(events.length).toBeLessThan(ids.length);
      expect(raw).not.toMatch(/\r\n0\r\n\r\n$/); // closed, not a finished response
      const got = events.map((e) => e.signal.id);
      const lastId = events[events.length - 1].id;
      const rest = await stream(slow.url, { token: admin.key, type: 'bulk', last_event_id: lastId }, 'resumed');
      await rest.waitSignals(ids.filter((id) => !got.includes(id)), 20_000);
      expectExactlyOnce([...got, ...rest.signalIds()], ids, 'cut stream, then resumed');
      expectIncreasingIds(rest.events.map((e) => e.id), 'resumed');
    });
  });
});
