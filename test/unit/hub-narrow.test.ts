/**
 * The hub offers an entry that names its identities (a direct signal, an event for some identities) only
 * to those identities' subscribers and to the ones without an identity (admin streams); every other entry
 * to all. A subscriber passed over meanwhile still catches up from its own position, and sees each of its
 * entries exactly once, in order.
 */
import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { JOURNAL_LOG, shownOnlyTo, type EventEntry, type JournalEntry, type SignalEntry } from '../../src/journal/journal.js';
import { createLogger } from '../../src/log.js';
import { Hub, type Delivery, type Subscriber } from '../../src/realtime/hub.js';
import { openEmbeddedStore } from '../../src/store/embedded.js';
import { tempDir } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

/** A subscriber of one identity (or of all, without one) that records what it was asked and shown. */
class Recorder implements Subscriber {
  lastSeq = 0;
  open = true;
  asked: number[] = [];
  got: number[] = [];
  /** while set, deliveries answer 'full' and room() waits for it to be released */
  blocked: (() => void) | undefined;
  private unblocked: Promise<void> = Promise.resolve();
  constructor(readonly identityId?: string) {}

  wants(e: JournalEntry, seq: number): boolean {
    this.asked.push(seq);
    const a = (e as EventEntry).audience;
    return this.identityId === undefined || a.members === true || (a.identities ?? []).includes(this.identityId);
  }
  deliver(_e: JournalEntry, seq: number): Delivery {
    if (this.blocked) return 'full';
    this.got.push(seq);
    return 'sent';
  }
  async room(): Promise<boolean> {
    await this.unblocked;
    return true;
  }
  block(): void {
    this.unblocked = new Promise((r) => (this.blocked = r));
  }
  release(): void {
    const r = this.blocked;
    this.blocked = undefined;
    r?.();
  }
  fail(): void {
    this.open = false;
  }
}

const event = (audience: EventEntry['audience'], n: number): EventEntry => ({ type: 'test', subject: 'x', data: n, audience });

describe('the hub offers narrow entries to their identities only', () => {
  const dirs: string[] = [];
  afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  it('skips other identities, keeps admin streams whole, and catches a passed-over subscriber up exactly once', async () => {
    const dir = await tempDir('svc-hub-narrow-');
    dirs.push(dir);
    const store = await openEmbeddedStore(dir);
    const hub = new Hub(store, createLogger('silent'), 10_000);
    await hub.start();
    const a = new Recorder('a');
    const b = new Recorder('b');
    const all = new Recorder();
    for (const s of [a, b, all]) await hub.attach(s);

    // seq 1..30: every third for a, every third for b, every third for every member
    const audiences = [{ identities: ['a'] }, { identities: ['b', 'c'] }, { members: true }];
    const commit = (n: number) => store.commit([{ op: 'append', log: JOURNAL_LOG, entry: event(audiences[(n - 1) % 3], n) }]);
    for (let n = 1; n <= 15; n++) await commit(n);
    await waitFor('the hub to reach 15', () => hub.cursor, (c) => c === 15, 5000, 10);
    a.block(); // a's buffer is full from here: its next entry starts a catch-up from the journal
    for (let n = 16; n <= 30; n++) await commit(n);
    await waitFor('the hub to reach 30', () => hub.cursor, (c) => c === 30, 5000, 10);
    a.release();
    await waitFor('a to catch up', () => hub.positions().every((p) => !p.catchingUp) && a.lastSeq === 30, (done) => done, 5000, 10);

    const forA = [1, 3, 4, 6, 7, 9, 10, 12, 13, 15, 16, 18, 19, 21, 22, 24, 25, 27, 28, 30];
    expect(a.got).toEqual(forA);
    expect(b.got).toEqual([2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 23, 24, 26, 27, 29, 30]);
    expect(all.got).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    // b was never asked about a's entries while live; a only about its own and the members' ones
    expect(b.asked.filter((s) => s % 3 === 1)).toEqual([]);
    expect(a.asked.filter((s) => s <= 15 && s % 3 === 2)).toEqual([]);
    expect(b.lastSeq).toBe(30);

    // a detached subscriber leaves its identity's set: nothing more reaches it
    hub.detach(b);
    await commit(31);
    await commit(32);
    await waitFor('the hub to reach 32', () => hub.cursor, (c) => c === 32, 5000, 10);
    expect(b.got.at(-1)).toBe(30);
    expect(all.got.at(-1)).toBe(32);
    await hub.stop();
    await store.close();
  });

  it('names the recipient, sender and claimer of a direct signal, and nobody narrower than everyone for a wide one', () => {
    const signal = (s: Partial<SignalEntry['signal']>, route: SignalEntry['route'] = { role_id: null, ring_id: null }): SignalEntry =>
      ({ type: 'signal.updated', signal: { to_identity: null, from_identity: 'from', claimed_by: null, to_peer: null, ...s }, route }) as unknown as SignalEntry;
    expect(shownOnlyTo(signal({ to_identity: 'to' }))).toEqual(['to', 'from', null]);
    expect(shownOnlyTo(signal({ to_identity: 'to', claimed_by: 'worker' }))).toEqual(['to', 'from', 'worker']);
    // a signal for a peer organization reaches nobody here but its sender and claimer
    expect(shownOnlyTo(signal({ to_peer: 'peer-org' } as never))).toEqual([null, 'from', null]);
    expect(shownOnlyTo(signal({}))).toBeUndefined(); // broadcast
    expect(shownOnlyTo(signal({ to_identity: 'to' }, { role_id: 'r1', ring_id: null }))).toBeUndefined();
    expect(shownOnlyTo(signal({}, { role_id: null, ring_id: 'g1' }))).toBeUndefined();
    expect(shownOnlyTo(event({ identities: ['x'] }, 0))).toEqual(['x']);
    expect(shownOnlyTo(event({ identities: ['x'], roles: ['r'] }, 0))).toBeUndefined();
    expect(shownOnlyTo(event({ members: true }, 0))).toBeUndefined();
    expect(shownOnlyTo(event({}, 0))).toEqual([]);
  });
});
