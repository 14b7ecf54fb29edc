/**
 * The runtime runs events through one inert actor scope per machine (not a new actor per event, as XState's
 * `transition()` makes): every hosted machine's transitions agree with `transition()`, interleaved sends of
 * different actors do not share actions, and a machine that would use the scope's actor system (delays,
 * invoked actors) is refused at registration.
 */
import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { assign, createMachine, raise, setup, transition } from 'xstate';
import { createLogger } from '../../src/log.js';
import { Runtime, type ActorKind } from '../../src/runtime/runtime.js';
import { openEmbeddedStore } from '../../src/store/embedded.js';
import { signalMachine } from '../../actors/signal.js';
import { tempDir } from '../helpers/redis.js';

type Ctx = { n: number; log: string[] };
const relay = setup({
  types: { context: {} as Ctx, events: {} as { type: 'GO' | 'NEXT' | 'BAD'; now: number } },
  actions: { refuse: () => {} },
}).createMachine({
  initial: 'a',
  context: { n: 0, log: [] },
  states: {
    a: { on: { GO: { target: 'b', actions: [assign(({ context }) => ({ n: context.n + 1, log: [...context.log, 'go'] })), raise({ type: 'NEXT', now: 0 })] } } },
    b: { on: { NEXT: { target: 'c', actions: assign(({ context }) => ({ log: [...context.log, 'next'] })) } } },
    c: { on: { BAD: { actions: { type: 'refuse', params: { code: 'VALIDATION_INVALID_TYPE' } } } } },
  },
});

const kindOf = (name: string, machine: ActorKind['machine']): ActorKind<Ctx> => ({
  name,
  machine,
  notFound: 'NOT_FOUND',
  invalid: 'SIGNAL_DELIVERY_INVALID_TRANSITION',
  indexes: () => [],
  timers: () => [],
});

describe('runtime transitions', () => {
  const dirs: string[] = [];
  afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));
  /** a runtime on a fresh embedded store, hosting `kind` */
  const hosting = async (kind: ActorKind<Ctx>) => {
    const dir = await tempDir('svc-rt-');
    dirs.push(dir);
    const store = await openEmbeddedStore(dir);
    const rt = new Runtime(store, createLogger('silent'), 50);
    rt.register(kind);
    return { store, rt };
  };

  it('agree with XState transition(): raised events run in the same step; a refusal is its own send’s alone', async () => {
    const { store, rt } = await hosting(kindOf('relay', relay));
    const create = () => ({ value: 'a', context: { n: 0, log: [] } });
    const [x, y] = await Promise.all([rt.send<Ctx>('relay', 'x', { type: 'GO' }, { create }), rt.send<Ctx>('relay', 'y', { type: 'GO' }, { create })]);
    const [expected] = transition(relay, relay.resolveState({ value: 'a', context: { n: 0, log: [] } }), { type: 'GO', now: 0 });
    for (const r of [x, y]) expect([r!.record.value, r!.record.context]).toEqual([expected.value, expected.context]);
    const [bad, fine] = await Promise.allSettled([rt.send('relay', 'x', { type: 'BAD' }), rt.send('relay', 'y', { type: 'NEXT' })]);
    expect(bad).toMatchObject({ status: 'rejected', reason: { code: 'VALIDATION_INVALID_TYPE' } });
    // no NEXT in c: the kind's invalid code, not the refusal the other send met in the same turn
    expect(fine).toMatchObject({ status: 'rejected', reason: { code: 'SIGNAL_DELIVERY_INVALID_TRANSITION' } });
    expect((await rt.load<Ctx>('relay', 'y'))!.value.context.log).toEqual(['go', 'next']);
    await rt.stop();
    await store.close();
  });

  it('a signal moves through pending, delivered, leased and acked as transition() says', async () => {
    const { store, rt } = await hosting(kindOf('signal', signalMachine));
    const ctx = { id: 's1', signal_type: 'task', base_type: 'task', to_identity: 'w', from_identity: 'r', task_status: 'open', claimed_by: null, claimed_at: null, claim_expires_at: null, delivery_count: 0, max_attempts: 5, federation: null };
    await store.commit(rt.createOps('signal', 's1', { value: 'pending', context: ctx }));
    let snap = signalMachine.resolveState({ value: 'pending', context: ctx as never });
    for (const event of [{ type: 'DELIVER', now: 1 }, { type: 'CLAIM', now: 2, identity: 'w', lease_ms: 1000 }, { type: 'ACK', now: 3, identity: 'w' }]) {
      const got = await rt.send('signal', 's1', event);
      [snap] = transition(signalMachine, snap, event as never);
      expect([got!.record.value, got!.record.context]).toEqual([snap.value, snap.context]);
    }
    expect(snap.value).toBe('acked');
    await rt.stop();
    await store.close();
  });

  it('refuses to host a machine with a delayed transition or an invoked actor', () => {
    const rt = new Runtime(undefined as never, createLogger('silent'), 50);
    const delayed = createMachine({ initial: 'a', states: { a: { after: { 1000: 'b' } }, b: {} } });
    const invoking = createMachine({ initial: 'a', states: { a: { invoke: { src: 'worker' } } } });
    expect(() => rt.register(kindOf('delayed', delayed))).toThrow('actor kind delayed: a hosted machine may not invoke actors or use delayed transitions');
    expect(() => rt.register(kindOf('invoking', invoking))).toThrow('actor kind invoking: a hosted machine may not invoke actors or use delayed transitions');
  });
});
