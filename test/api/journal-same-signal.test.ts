/**
 * A task's completion is journaled once: its `task.completed` entry follows the ack's `signal.updated` entry and
 * is stored without the Signal (`same_signal`). Every reader still sees the Signal in it: a socket resuming
 * from a cursor just before either entry, an SSE stream resuming likewise, and the trim of the journal, which
 * never cuts between the two. On both backends.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Started } from '../helpers/server.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { PushSocket, SseStream, waitFor } from '../helpers/push.js';
import { emitOk, expectOk } from './support.js';
import { JOURNAL_LOG } from '../../src/journal/journal.js';

const RETAIN = 10;

describe.each(BACKENDS)('a task completion journaled once on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Started;
  let boss: Member;
  let worker: Member;
  let taskId: string;
  /** the ack's signal.updated entry; the task.completed entry is the next */
  let acked: number;

  beforeAll(async () => {
    svc = await servers.start({ JOURNAL_RETAIN_ENTRIES: String(RETAIN) });
    const root = await bootstrap(svc.url);
    boss = await join(root.client, 'once-boss');
    worker = await join(root.client, 'once-worker');
    taskId = (await emitOk(boss, { signal_type: 'task', content: 'once', to_identity: worker.id })).id;
    expectOk(await worker.client.post('/claim', { signal_id: taskId }));
    expectOk(await worker.client.post('/ack', { signal_id: taskId, outcome: 'completed', claim_token: 1, result: { rows: 7 } }));
    acked = (await svc.store.lastSeq(JOURNAL_LOG)) - 1;
  });

  it('stores the completion without the Signal, right after the ack that carries it', async () => {
    const [ack, done] = await svc.store.readLog<any>(JOURNAL_LOG, acked - 1, 2);
    expect(ack.entry).toMatchObject({ type: 'signal.updated', signal: { id: taskId, task_status: 'completed', result: { rows: 7 } } });
    expect(done.entry).toEqual({ type: 'task.completed', subject: 'signal', audience: { identities: [boss.id] }, same_signal: true });
  });

  it('a socket resuming at the ack, or just after it, is pushed the completion with the Signal', async () => {
    for (const after of [acked - 1, acked]) {
      const s = await PushSocket.open(svc.url, boss.key, { after: String(after), label: `boss after ${after}` });
      await waitFor(() => s.frames.some((f) => f.type === 'task.completed'), 5000, `the task.completed frame after cursor ${after}`);
      const frame = s.frames.find((f) => f.type === 'task.completed')!;
      expect(frame.cursor).toBe(String(acked + 1));
      expect(frame.signal).toMatchObject({ id: taskId, task_status: 'completed', result: { rows: 7 }, delivery_state: 'acked' });
      if (after < acked) expect(frame.signal).toEqual(s.updates(taskId).find((f) => f.cursor === String(acked))!.signal);
      await s.close();
    }
  });

  it('an SSE stream resuming just after the ack gets the completion with the Signal', async () => {
    const es = await SseStream.open(svc.url, { token: boss.key, last_event_id: String(acked) }, 'boss stream', ['task.completed']);
    try {
      await waitFor(() => es.events.length > 0, 5000, 'the task.completed event');
      expect(es.events[0].id).toBe(String(acked + 1));
      expect(es.events[0].signal).toMatchObject({ id: taskId, task_status: 'completed', result: { rows: 7 } });
    } finally {
      es.close();
    }
  });

  it('the trim keeps the ack with its completion, and a cursor before them still resumes', async () => {
    // RETAIN - 1 more entries (signals to nobody's socket, so no delivered marks) put the cut between the two
    for (let i = 0; i < RETAIN - 1; i++) await emitOk(boss, { signal_type: 'note', content: `after ${i}`, to_identity: worker.id });
    const last = await svc.store.lastSeq(JOURNAL_LOG);
    expect(last - RETAIN + 1).toBe(acked + 1);
    // one trim step cuts at once: straight past the ack if it split the two, at the ack if it keeps them
    await waitFor(async () => (await svc.store.logStart(JOURNAL_LOG)) >= acked, 5000, 'the journal to be trimmed');
    expect(await svc.store.logStart(JOURNAL_LOG)).toBe(acked);
    const s = await PushSocket.open(svc.url, boss.key, { after: String(acked - 1), label: 'boss at the window' });
    await waitFor(() => s.frames.some((f) => f.type === 'task.completed'), 5000, 'the task.completed frame');
    expect(s.frames.find((f) => f.type === 'task.completed')!.signal).toMatchObject({ id: taskId, result: { rows: 7 } });
    await s.close();
  });
});
