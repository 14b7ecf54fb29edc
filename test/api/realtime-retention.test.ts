/**
 * The journal keeps the last JOURNAL_RETAIN_ENTRIES changes. A cursor inside that window resumes; one whose
 * following changes were trimmed is refused with 410 PUSH_CURSOR_EXPIRED (WebSocket upgrade, resume op,
 * SSE Last-Event-ID), never silently resumed with a gap.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Started } from '../helpers/server.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { bootstrap, type Member } from '../helpers/client.js';
import { PushSocket, refusedUpgrade, waitFor } from '../helpers/push.js';
import { emitOk, expectError } from './support.js';
import { SIGNAL_LOG } from '../../src/signals/kind.js';

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
    await waitFor(async () => (await svc.store.logStart(SIGNAL_LOG)) > 1, 5000, 'the journal to be trimmed');
  });

  it('keeps the last entries and drops the rest', async () => {
    const last = await svc.store.lastSeq(SIGNAL_LOG);
    const start = await svc.store.logStart(SIGNAL_LOG);
    expect(start).toBe(last - 10 + 1);
    expect((await svc.store.readLog(SIGNAL_LOG, 0, 100)).map((e) => e.seq)).toEqual(Array.from({ length: 10 }, (_, i) => start + i));
  });

  it('a cursor inside the window resumes; one before it is refused on every path', async () => {
    const start = await svc.store.logStart(SIGNAL_LOG);
    const inside = String(start - 1);
    const s = await PushSocket.open(svc.url, root.key, { after: inside });
    await waitFor(() => s.pushes().length >= 10, 5000, 'the 10 retained changes');
    // the replayed pending signals are then marked delivered: those updates follow as new changes
    expect(s.pushes().slice(0, 10).map((f) => Number(f.cursor))).toEqual(Array.from({ length: 10 }, (_, i) => start + i));
    expect(s.pushes().slice(0, 10).map((f) => f.signal.id)).toEqual(ids.slice(-10));

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
});
