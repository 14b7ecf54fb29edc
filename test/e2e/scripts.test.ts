import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, childEnv, serversOn, type Started } from '../helpers/server.js';
import { bootstrap } from '../helpers/client.js';

const run = promisify(execFile);
const actors = (env: Record<string, string>, ...args: string[]) =>
  run(process.execPath, ['--import', 'tsx', 'scripts/actors.ts', ...args], { env: childEnv(env) });

describe.each(BACKENDS)('operator script `npm run actors` (%s)', (backend) => {
  const servers = serversOn(backend);
  let svc: Started;

  beforeAll(async () => {
    svc = await servers.start();
  });

  it('prints a live actor record and the journal while the service runs', async () => {
    const root = await bootstrap(svc.url);
    const emitted = await root.client.post('/emit', { signal_type: 'task', content: 'inspect me' });
    await root.client.post('/claim', { signal_id: emitted.body.data.id });

    const { stdout } = await actors(svc.env, 'signal', emitted.body.data.id);
    const rec = JSON.parse(stdout);
    expect(rec).toMatchObject({ kind: 'signal', id: emitted.body.data.id, version: 2, value: 'leased' });
    expect(rec.context.claimed_by).toBe(root.id);

    const journal = (await actors(svc.env, 'journal', '5')).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(journal.map((e) => e.entry.type)).toEqual(['signal', 'signal.updated']);
    expect(journal[1].seq).toBe(journal[0].seq + 1);
  });

  it('exits non-zero for an unknown actor', async () => {
    await expect(actors(svc.env, 'signal', 'nope')).rejects.toMatchObject({ code: 1 });
  });
});
