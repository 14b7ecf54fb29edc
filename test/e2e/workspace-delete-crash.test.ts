/**
 * A workspace deletion survives its process. On both backends a folder with 210 folders below it is
 * deleted two children per commit (WORKSPACE_DELETE_PAGE_SIZE=2, over 300 commits); DELETE answers 202 at
 * once (WORKSPACE_DELETE_WAIT_MS=0) pointing at the deletion, whose progress is read until it is part done; the service is SIGKILLed there and
 * started again on the same data. Once the dead sweep's lease (WORKSPACE_DELETE_LEASE_MS=1000) lapsed, the
 * new process takes the deletion over and completes it: every item deleted, each counted once.
 */
import { describe, expect, it } from 'vitest';
import { bootstrap, Client } from '../helpers/client.js';
import { BACKENDS, childServersOn } from '../helpers/server.js';
import { expectError, expectOk, waitFor } from '../api/support.js';

const ENV = { WORKSPACE_DELETE_PAGE_SIZE: '2', WORKSPACE_DELETE_WAIT_MS: '0', WORKSPACE_DELETE_LEASE_MS: '1000' };

/** Creates `names.length` folders in `parent_id`, a few requests at a time; answers their ids. */
async function folders(c: Client, parent_id: string | undefined, names: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < names.length; i += 20) {
    const made = await Promise.all(names.slice(i, i + 20).map(async (name) => expectOk(await c.post('/workspace/folders', { name, parent_id }), 201).id as string));
    ids.push(...made);
  }
  return ids;
}

for (const backend of BACKENDS) {
  describe(`a workspace deletion across a SIGKILL on ${backend}`, () => {
    const fleet = childServersOn(backend, 'SIGKILL');

    it('a delete killed part way is taken over after the restart and completes, every item deleted once', async () => {
      const env = await fleet.env(ENV);
      const first = await fleet.start(env);
      const root = await bootstrap(first.url);
      const [top] = await folders(root.client, undefined, ['big']);
      const subs = await folders(root.client, top, Array.from({ length: 10 }, (_, i) => `s${i}`));
      const leaves: string[] = [];
      for (const sub of subs) leaves.push(...(await folders(root.client, sub, Array.from({ length: 20 }, (_, i) => `l${i}`))));

      const del = await fetch(`${first.url}/workspace/items/${top}`, { method: 'DELETE', headers: { authorization: `Bearer ${root.key}` } });
      expect(del.status).toBe(202);
      expect(del.headers.get('location')).toBe(`/workspace/deletions/${top}`);
      expect(((await del.json()) as any).data).toMatchObject({ id: top, status: 'running', deleted_by: root.id, completed_at: null });
      const progress = async (c: Client) => expectOk(await c.get(`/workspace/deletions/${top}`));
      const part = await waitFor('the deletion part done', () => progress(root.client), (d) => d.deleted > 1, 30_000, 2);
      await fleet.kill(first);
      expect(part.status).toBe('running');

      const second = await fleet.start(env);
      const again = new Client(second.url, root.key);
      const done = await waitFor('the deletion completed after the restart', () => progress(again), (d) => d.status === 'completed', 30_000);
      expect(done).toMatchObject({ id: top, deleted: 1 + 10 + 200, folders_left: 0, deleted_by: root.id });
      expect(done.deleted).toBeGreaterThan(part.deleted);
      for (let i = 0; i < leaves.length; i += 50) {
        const answers = await Promise.all([top!, ...subs, ...leaves].slice(i, i + 50).map((id) => again.get(`/workspace/items/${id}`)));
        for (const r of answers) expectError(r, 404, 'WORKSPACE_ITEM_NOT_FOUND');
      }
      expect(expectOk(await again.get('/workspace/items?limit=100')).items.map((x: any) => x.id)).not.toContain(top);
    }, 240_000);
  });
}
