/**
 * The journal keeps the last JOURNAL_RETAIN_ENTRIES changes. A cursor inside that window resumes; one whose
 * following changes were trimmed is refused with 410 PUSH_CURSOR_EXPIRED (WebSocket upgrade, resume op,
 * SSE Last-Event-ID), never silently resumed with a gap; a socket that lags behind the window is closed
 * with 4410.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Started } from '../helpers/server.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { bootstrap, type Member } from '../helpers/client.js';
import { pool, PushSocket, refusedUpgrade, waitFor } from '../helpers/push.js';
import { emitOk, expectError } from './support.js';
import { JOURNAL_LOG } from '../../src/journal/journal.js';

describe.each(BACKENDS)('journal retention on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Started;
  let root: Member;
  const ids: string[] = [];

  beforeAll(async () => {
    svc = await servers.start({ JOURNAL_RETAIN_ENTRIES: '10' });
    root = await bootstrap(svc.url);
    for (let i = 0; i < 30; i++) ids.push((await emitOk(root, { signal_type: 'pulse', content: `n${i}` })).id);
    // the hub trims on its one-second beat
    const last = await svc.store.lastSeq(JOURNAL_LOG);
    await waitFor(async () => (await svc.store.logStart(JOURNAL_LOG)) === last - 10 + 1, 5000, 'the journal to be trimmed to its last 10 entries');
  });

  it('keeps the last entries and drops the rest', async () => {
    const last = await svc.store.lastSeq(JOURNAL_LOG);
    const start = await svc.store.logStart(JOURNAL_LOG);
    expect(start).toBe(last - 10 + 1);
    expect((await svc.store.readLog(JOURNAL_LOG, 0, 100)).map((e) => e.seq)).toEqual(Array.from({ length: 10 }, (_, i) => start + i));
  });

  it('a cursor inside the window resumes; one before it is refused on every path', async () => {
    const start = await svc.store.logStart(JOURNAL_LOG);
    const s = await PushSocket.open(svc.url, root.key, { after: String(start - 1) });
    await waitFor(() => s.pushes().length >= 10, 5000, 'the 10 retained changes');
    // the replayed pending signals are then marked delivered: those updates follow as new changes
    expect(s.pushes().slice(0, 10).map((f) => Number(f.cursor))).toEqual(Array.from({ length: 10 }, (_, i) => start + i));
    expect(s.pushes().slice(0, 10).map((f) => f.signal.id)).toEqual(ids.slice(-10));
    // those updates move the window on the hub's next trim: the cursors below are taken once it has moved
    await waitFor(() => ids.slice(-10).every((id) => s.updates(id).length > 0), 10_000, 'the delivered updates of the replayed signals');
    const last = await svc.store.lastSeq(JOURNAL_LOG);
    await waitFor(async () => (await svc.store.logStart(JOURNAL_LOG)) >= last - 10 + 1, 10_000, 'the journal to be trimmed past them');
    const inside = String((await svc.store.logStart(JOURNAL_LOG)) - 1);

    const refused = await s.op('resume', { after: '0' });
    expect(refused.type).toBe('error');
    expect(refused.error).toMatchObject({ code: 'PUSH_CURSOR_EXPIRED', details: { oldest_cursor: inside } });
    expect((await s.ok('resume', { after: inside })).resumed_from).toBe(inside);
    await s.close();

    const up = await refusedUpgrade(svc.url, root.key, { after: '0' });
    expect(up.status).toBe(410);
    expect(up.body.error).toMatchObject({ code: 'PUSH_CURSOR_EXPIRED', details: { oldest_cursor: inside } });

    const sse = await fetch(`${svc.url}/signals/stream?token=${root.key}&last_event_id=3`);
    expectError({ status: sse.status, body: await sse.json() }, 410, 'PUSH_CURSOR_EXPIRED');
  });

  it('closes a socket with 4410 when the journal is trimmed past a position it has not caught up from', async () => {
    const lagging = await servers.start({ JOURNAL_RETAIN_ENTRIES: '10', PUSH_MAX_BUFFER_BYTES: '65536', PUSH_DRAIN_TIMEOUT_MS: '30000' });
    const admin = await bootstrap(lagging.url);
    const s = await PushSocket.open(lagging.url, admin.key, { label: 'lagging' });
    s.ws.pause();
    const big = 'z'.repeat(40 * 1024);
    const emitting = pool(200, 4, async (i) => emitOk(admin, { signal_type: 'pulse', content: `${i} ${big}` }));
    const stuck = () => lagging.realtime.hub.positions().find((p) => p.waitingForRoom);
    await waitFor(() => stuck() !== undefined, 20_000, 'the paused socket to be held back');
    await emitting;
    const end = await lagging.store.lastSeq(JOURNAL_LOG);
    // the window moves past everything the socket still owes
    for (let i = 0; i < 12; i++) await emitOk(admin, { signal_type: 'pulse', content: `after ${i}` });
    await waitFor(async () => (await lagging.store.logStart(JOURNAL_LOG)) > end + 1, 5000, 'the journal to be trimmed past the socket');
    s.ws.resume();
    const closed = await s.closed();
    expect(closed.code).toBe(4410);
    const err = s.frames[s.frames.length - 1];
    expect(err.type).toBe('error');
    expect(err.error).toMatchObject({ code: 'PUSH_CURSOR_EXPIRED', details: { oldest_cursor: expect.stringMatching(/^\d+$/) } });
    expect(BigInt(err.error!.details.oldest_cursor)).toBeGreaterThan(BigInt(end));
    // what it did get came in order, without a hole
    const cursors = s.pushes().map((f) => Number(f.cursor));
    expect(cursors.length).toBeGreaterThan(0);
    cursors.forEach((c, i) => i > 0 && expect(c).toBeGreaterThan(cursors[i - 1]));
  }, 60_000);
});
