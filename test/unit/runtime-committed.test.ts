/** The runtime's `committed` hook: called once per successful commit with the new and previous record, never on a refusal, and its failure never reaches the sender. */
import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { assign, setup } from 'xstate';
import { AppError } from '../../src/errors.js';
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
  /** A runtime on a real embedded store whose commits are recorded (the keys each one puts). */
  const spied = async () => {
    const dir = await tempDir('svc-rt-');
    dirs.push(dir);
    const store = await openEmbeddedStore(dir);
    const commits: string[][] = [];
    const spy = { ...store, commit: (ops: Parameters<typeof store.commit>[0]) => (commits.push(ops.filter((o) => o.op === 'put').map((o) => (o as { key: string }).key)), store.commit(ops)) };
    return { store, rt: new Runtime(spy, createLogger('silent'), 50), commits };
  };

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

  it('alongside ops of another actor ride in the same commit as the move', async () => {
    const { store, rt, commits } = await spied();
    const base = { machine: counter, notFound: 'NOT_FOUND' as const, invalid: 'VALIDATION_INVALID_TYPE' as const, indexes: () => [], timers: () => [] };
    rt.register({ ...base, name: 'follower' });
    rt.register({
      ...base,
      name: 'leader',
      // stopping the leader stops its follower in the same commit
      alongside: async (id, rec, prev, r) => {
        if (rec.value !== 'off' || prev?.value === 'off') return [];
        const f = await r.store.get<ActorRecord<{ n: number }>>(`actor:follower:${id}`);
        return (f && r.moveOps('follower', id, f, { type: 'STOP' })?.ops) ?? [];
      },
    } as ActorKind<{ n: number }>);
    const create = () => ({ value: 'on', context: { n: 0 } });
    await rt.send('leader', 'x', { type: 'INC' }, { create });
    await rt.send('follower', 'x', { type: 'INC' }, { create });
    commits.length = 0;
    await rt.send('leader', 'x', { type: 'STOP' });
    expect(commits).toHaveLength(1);
    expect(commits[0].length).toBe(2);
    expect((await rt.load<{ n: number }>('follower', 'x'))?.value.value).toBe('off');
    expect((await rt.load<{ n: number }>('follower', 'x'))?.value.context.n).toBe(1);
    await rt.stop();
    await store.close();
  });

  it('a joined move rides in the send\'s commit when it moves; a stale or idle one is dropped and the send commits alone', async () => {
    const { store, rt, commits } = await spied();
    const told: string[] = [];
    rt.register({ name: 'counter', machine: counter, notFound: 'NOT_FOUND', invalid: 'VALIDATION_INVALID_TYPE', indexes: () => [], timers: () => [], committed: (id, rec) => void told.push(`${id}:${rec.context.n}`) } as ActorKind<{ n: number }>);
    const create = () => ({ value: 'on', context: { n: 0 } });
    for (const id of ['a', 'b']) await rt.send('counter', id, { type: 'INC' }, { create });
    const load = async (id: string) => (await store.get<ActorRecord>(`actor:counter:${id}`))!;
    const n = async (id: string) => (await rt.load<{ n: number }>('counter', id))!.value.context.n;

    commits.length = 0;
    told.length = 0;
    const both = await rt.send('counter', 'a', { type: 'INC' }, { join: { kind: 'counter', id: 'b', loaded: await load('b'), event: { type: 'INC' } } });
    expect(commits).toEqual([['actor:counter:a', 'actor:counter:b']]);
    expect((both!.joined as ActorRecord<{ n: number }>).context.n).toBe(2);
    expect([await n('a'), await n('b')]).toEqual([2, 2]);
    expect(told.sort()).toEqual(['a:2', 'b:2']);

    // b read before its last move: the shared commit fails on b, and a goes again alone
    const stale = await load('b');
    await rt.send('counter', 'b', { type: 'INC' });
    commits.length = 0;
    const alone = await rt.send('counter', 'a', { type: 'INC' }, { join: { kind: 'counter', id: 'b', loaded: stale, event: { type: 'INC' } } });
    expect(alone!.joined).toBeUndefined();
    expect(commits).toEqual([['actor:counter:a', 'actor:counter:b'], ['actor:counter:a']]);
    expect([await n('a'), await n('b')]).toEqual([3, 3]);

    // an event b's machine does not take (it is off): nothing of b is offered
    await rt.send('counter', 'b', { type: 'STOP' });
    commits.length = 0;
    const idle = await rt.send('counter', 'a', { type: 'INC' }, { join: { kind: 'counter', id: 'b', loaded: await load('b'), event: { type: 'INC' } } });
    expect(idle!.joined).toBeUndefined();
    expect(commits).toEqual([['actor:counter:a']]);
    expect(await n('a')).toBe(4);
    await rt.stop();
    await store.close();
  });

  it('a join is dropped when its alongside refuses or writes a record the send writes too (planned from the same read)', async () => {
    const { store, rt, commits } = await spied();
    // every move of a "pooled" counter rewrites one shared tally, read-modify-write as a concurrency key's record is
    rt.register({
      name: 'pooled',
      machine: counter,
      notFound: 'NOT_FOUND',
      invalid: 'VALIDATION_INVALID_TYPE',
      indexes: () => [],
      timers: () => [],
      alongside: async (id, rec) => {
        if (rec.context.n > 5) throw new AppError('SIGNAL_CLAIM_INVALID_STATUS');
        const t = await store.get<{ moves: number }>('tally');
        return [{ op: 'put', key: 'tally', value: { moves: (t?.value.moves ?? 0) + 1 }, expect: t?.version ?? 0 }];
      },
    } as ActorKind<{ n: number }>);
    const create = () => ({ value: 'on', context: { n: 0 } });
    for (const id of ['a', 'b']) await rt.send('pooled', id, { type: 'INC' }, { create });
    const load = async (id: string) => (await store.get<ActorRecord>(`actor:pooled:${id}`))!;
    commits.length = 0;
    const shared = await rt.send('pooled', 'a', { type: 'INC' }, { join: { kind: 'pooled', id: 'b', loaded: await load('b'), event: { type: 'INC' } } });
    expect(shared!.joined).toBeUndefined();
    expect(commits).toEqual([['actor:pooled:a', 'tally']]);
    expect((await store.get<{ moves: number }>('tally'))!.value.moves).toBe(3);

    // b's alongside refuses its move (past 5): the send commits alone, and does not fail
    for (let i = 0; i < 4; i++) await rt.send('pooled', 'b', { type: 'INC' });
    rt.register({ name: 'solo', machine: counter, notFound: 'NOT_FOUND', invalid: 'VALIDATION_INVALID_TYPE', indexes: () => [], timers: () => [] } as ActorKind<{ n: number }>);
    await rt.send('solo', 'c', { type: 'INC' }, { create });
    commits.length = 0;
    const refused = await rt.send('solo', 'c', { type: 'INC' }, { join: { kind: 'pooled', id: 'b', loaded: await load('b'), event: { type: 'INC' } } });
    expect(refused!.joined).toBeUndefined();
    expect(commits).toEqual([['actor:solo:c']]);
    expect((await rt.load<{ n: number }>('pooled', 'b'))!.value.context.n).toBe(5);
    await rt.stop();
    await store.close();
  });
});
