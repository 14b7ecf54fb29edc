/**
 * Contention on one thread over real HTTP, on both backends: 200 concurrent replies to one thread all
 * succeed, with distinct, gapless sequence numbers 1..200, and the thread lists them in that order.
 */
import { describe, expect, it } from 'vitest';
import { bootstrap, join } from '../helpers/client.js';
import { CORE_BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, threadAll } from './support.js';

const REPLIES = 200;

describe.each(CORE_BACKENDS)('thread contention on %s', (backend) => {
  const servers = serversOn(backend);

  it(`${REPLIES} concurrent replies to one thread all succeed with distinct, gapless sequences`, async () => {
    const svc = await servers.start();
    const root = await bootstrap(svc.url);
    const members = [root, await join(root.client, 'c1'), await join(root.client, 'c2'), await join(root.client, 'c3')];
    const top = await emitOk(root, { signal_type: 'proposal', content: 'hot thread' });
    // half reply to the root, half to an earlier reply: both join the root's counter
    const first = await emitOk(root, { signal_type: 'pulse', content: 'first reply', parent_id: top.id });
    const results = await Promise.all(
      Array.from({ length: REPLIES - 1 }, (_, i) => members[i % members.length].client.post('/emit', { signal_type: 'pulse', content: `r${i}`, parent_id: i % 2 ? top.id : first.id })),
    );
    expect(results.filter((r) => r.status !== 201).map((r) => r.body)).toEqual([]);
    const seqs = [first, ...results.map((r) => r.body.data)].map((s) => s.sequence).sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: REPLIES }, (_, i) => i + 1));
    const thread = await threadAll(root.client, top.id);
    expect(thread.map((s: any) => s.sequence)).toEqual(Array.from({ length: REPLIES + 1 }, (_, i) => i));
  }, 60_000);
});
