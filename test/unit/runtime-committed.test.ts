/** The runtime's `committed` hook: called once per successful commit with the new and previous record, never on a refusal, and its failure never reaches the sender. */
import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { assign, setup } from 'xstate';
import { createLogger } from '../../src/log.js';
import { Runtime, type ActorKind, type ActorRecord } from '../../src/runtime/runtime.js';
import { openEmbeddedStore } from '../../src/store/embedded.js';
import { tempDir } from '../helpers/redis.js';

const counter = setup({ types: { context: {} as { n: number }, events: {} as { type: 'INC' | 'STOP'; now: number } } }).createMachine({
  initial: 'on',
  context: { n: 0 },
  states: { on: { on: { INC: { actions: assign(({ context }) => ({ n: context.n + 1 })) }, STOP: 'off' } }, off: {} },
});

describe('runtime committed hook', () => {
  const dirs: string[] = [];
  afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  it('fires after each commit with (id, record, prev); not for refused events; a throwing hook does not fail send', async () => {
    const dir = await tempDir('svc-rt-');
    dirs.push(dir);
    const store = await openEmbeddedStore(dir);
    const rt = new Runtime(store, createLogger('silent'), 50);
    const seen: [string, ActorRecord<{ n: number }>, ActorRecord<{ n: number }> | undefined][] = [];
    const kind: ActorKind<{ n: number }> = {
      name: 'counter',
      machine: counter,
      notFound: 'NOT_FOUND',
      invalid: 'VALIDATION_INVALID_TYPE',
      indexes: () => [],
      timers: () => [],
      committed: (id, rec, prev) => {
        seen.push([id, rec, prev]);
        if (rec.context.n === 2) throw new Error('hook failure');
      },
    };
    rt.register(kind);
    const create = () => ({ value: 'on', context: { n: 0 } });
    await rt.send('counter', 'a', { type: 'INC' }, { create });
    await rt.send('counter', 'a', { type: 'INC' });
    await rt.send('counter', 'a', { type: 'STOP' });
    await expect(rt.send('counter', 'a', { type: 'INC' })).rejects.toMatchObject({ code: 'VALIDATION_INVALID_TYPE' });
    expect(seen.map(([id, r, p]) => [id, r.value, r.context.n, p?.value ?? null, p?.context.n ?? null])).toEqual([
      ['a', 'on', 1, null, null],
      ['a', 'on', 2, 'on', 1],
      ['a', 'off', 2, 'on', 2],
    ]);
    await rt.stop();
    await store.close();
  });
});
