import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendEnv, childEnv, startServer, type BackendEnv } from '../helpers/server.js';
import { bootstrap } from '../helpers/client.js';
import type { Service } from '../../src/app.js';

const run = promisify(execFile);
const actors = (env: Record<string, string>, ...args: string[]) =>
  run(process.execPath, ['--import', 'tsx', 'scripts/actors.ts', ...args], { env: childEnv(env) });

describe.each(BACKENDS)('operator script `npm run actors` (%s)', (backend) => {
  let be: BackendEnv;
  let env: Record<string, string>;
  let svc: Service;

  beforeAll(async () => {
    be = await backendEnv(backend);
    env = await be.env();
    svc = await startServer(env);
  });
  afterAll(async () => {
    await svc?.close();
    await be?.stop();
  });

  it('prints a live actor record and the journal while the service runs', async () => {
    const root = await bootstrap(svc.url);
    const emitted = await root.client.post('/emit', { signal_type: 'task', content: 'inspect me' });
    await root.client.post('/claim', { signal_id: emitted.body.data.id });

    const { stdout } = await actors(env, 'signal', emitted.body.data.id);
    const rec = JSON.parse(stdout);
    expect(rec).toMatchObject({ kind: 'signal', id: emitted.body.data.id, version: 2, value: 'leased' });
    expect(rec.context.claimed_by).toBe(root.id);

    const journal = (await actors(env, 'journal', '5')).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(journal.map((e) => e.entry.type)).toEqual(['signal', 'signal.updated']);
    expect(journal[1].seq).toBe(journal[0].seq + 1);
  });

  it('exits non-zero for an unknown actor', async () => {
    await expect(actors(env, 'signal', 'nope')).rejects.toMatchObject({ code: 1 });
  });
});
