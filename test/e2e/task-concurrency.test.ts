/**
 * concurrency_limit across instances: two instances sharing one Redis, 50 workflow.next callers (25 on each)
 * asking at once, in waves where each holder completes its task in the same call that asks for the next. The
 * tasks of one key (limit 2) rank above the others. After every wave at most two of them are leased, each
 * wave's grants of the key are at most two plus the slots it freed, the callers still get the other tasks
 * (no starvation), and every task's transitions show no grant of the key beyond its limit.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { serversOn, startServer } from '../helpers/server.js';
import type { Service } from '../../src/app.js';
import { emitOk, expectOk } from '../api/support.js';

const LIMIT = 2;
const CALLERS = 50;
const WAVES = 4;

describe('concurrency_limit on two instances sharing one Redis', () => {
  const servers = serversOn('redis');
  let a: Service | undefined;
  let b: Service | undefined;
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  it(`${CALLERS} concurrent workflow.next callers never lease more than the limit of one key`, async () => {
    const env = await servers.env();
    // two services on one Redis prefix: two instances, each with its own runtime, timers and turns
    [a, b] = await Promise.all([startServer(env), startServer(env)]);
    const root = await bootstrap(a.url);
    const boss = await join(root.client, 'boss');
    const callers: Member[] = [];
    for (let i = 0; i < CALLERS; i += 10) callers.push(...(await Promise.all([0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((j) => join(root.client, `worker-${i + j}`)))));
    const keyed: string[] = [];
    for (let i = 0; i < 12; i++) keyed.push((await emitOk(boss, { signal_type: 'task', content: `deploy ${i}`, payload: { task_type: 'job' }, concurrency_key: 'deploy:prod', concurrency_limit: LIMIT, priority: 5 })).id);
    for (let i = 0; i < WAVES; i++) await Promise.all(callers.map((_, j) => emitOk(boss, { signal_type: 'task', content: `other ${i}.${j}`, payload: { task_type: 'job' } })));

    const rpc = async (m: Member, url: string, params: Record<string, unknown>) => {
      const res = await new Client(url, m.key).req('POST', '/rpc', { jsonrpc: '2.0', id: 1, method: 'workflow.next', params });
      expect(res.body.error, JSON.stringify(res.body.error)).toBeUndefined();
      return res.body.result as { signal: any; claim?: any };
    };
    const held = new Map<string, string>();
    const keyedLeased = async () => {
      const shown = await Promise.all(keyed.map(async (id) => (expectOk(await root.client.get(`/thread/${id}`)).signals as any[])[0]));
      return shown.filter((s) => s.delivery_state === 'leased');
    };
    for (let wave = 0; wave < WAVES; wave++) {
      const answers = await Promise.all(
        callers.map((m, i) => rpc(m, i % 2 ? a!.url : b!.url, { task_types: ['job'], ...(held.has(m.id) && { complete_claim: held.get(m.id) }) })),
      );
      held.clear();
      answers.forEach((r, i) => r.signal && held.set(callers[i].id, r.signal.id));
      const got = answers.filter((r) => r.signal).map((r) => r.signal);
      expect(got.filter((s) => s.concurrency_key === 'deploy:prod').length, `wave ${wave}`).toBeLessThanOrEqual(LIMIT);
      expect(got.filter((s) => s.concurrency_key !== 'deploy:prod').length, `wave ${wave}: other tasks still served`).toBeGreaterThanOrEqual(CALLERS - LIMIT - 5);
      expect((await keyedLeased()).length, `wave ${wave}`).toBeLessThanOrEqual(LIMIT);
    }
    // each key's grants, read from the tasks' transitions, never overlap beyond the limit
    const admin = new Client(b.url, root.key);
    const spans: [number, number][] = [];
    for (const id of keyed) {
      const moves = expectOk(await admin.get(`/admin/actors/signal/${id}`)).transitions as any[];
      moves.forEach((t, i) => {
        if (t.to !== 'leased' || t.from === 'leased') return;
        const end = moves.slice(i + 1).find((x) => x.to !== 'leased');
        spans.push([Date.parse(t.at), end ? Date.parse(end.at) : Infinity]);
      });
    }
    expect(spans.length).toBeGreaterThanOrEqual(LIMIT * WAVES - LIMIT);
    for (const [start] of spans) expect(spans.filter(([s, e]) => s <= start && start < e).length).toBeLessThanOrEqual(LIMIT);
  }, 180_000);
});
