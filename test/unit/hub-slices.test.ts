/**
 * An entry for thousands of subscribers is offered FAN_OUT_SLICE at a time with a turn of the event loop
 * between slices, so the commit's own answer and other I/O are not held until the last socket has it; each
 * subscriber still sees every entry once, in order, including one that attaches between two slices.
 */
import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { JOURNAL_LOG, type EventEntry, type JournalEntry } from '../../src/journal/journal.js';
import { createLogger } from '../../src/log.js';
import { FAN_OUT_SLICE, Hub, type Delivery, type Subscriber } from '../../src/realtime/hub.js';
import { openEmbeddedStore } from '../../src/store/embedded.js';
import { tempDir } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

class Recorder implements Subscriber {
  lastSeq = 0;
  open = true;
  got: number[] = [];
  constructor(
    readonly identityId: string | undefined,
    private onDeliver: (r: Recorder, seq: number) => void,
  ) {}
  wants(e: JournalEntry): boolean {
    const a = (e as EventEntry).audience;
    return this.identityId === undefined || a.members === true || (a.identities ?? []).includes(this.identityId);
  }
  deliver(_e: JournalEntry, seq: number): Delivery {
    this.got.push(seq);
    this.onDeliver(this, seq);
    return 'sent';
  }
  async room(): Promise<boolean> {
    return true;
  }
  fail(): void {
    this.open = false;
  }
}

const event = (audience: EventEntry['audience']): EventEntry => ({ type: 'test', subject: 'x', data: 0, audience });

describe('the hub fans out in slices', () => {
  const dirs: string[] = [];
  afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  for (const shape of ['to every member', 'to 2,000 named identities'] as const) {
    it(`yields to I/O between slices of an entry ${shape}, and every subscriber sees each entry once, in order`, async () => {
      const dir = await tempDir('svc-hub-slices-');
      dirs.push(dir);
      const store = await openEmbeddedStore(dir);
      const hub = new Hub(store, createLogger('silent'), 10_000);
      await hub.start();
      const n = 2000;
      expect(n).toBeGreaterThan(4 * FAN_OUT_SLICE);

      // the first delivery of entry 1 schedules an I/O-phase callback; which deliveries came after it ran?
      let scheduled = false;
      let ioRan = false;
      let afterIo = 0;
      let late: Recorder | undefined;
      const onDeliver = (_r: Recorder, seq: number) => {
        if (seq !== 1) return;
        if (!scheduled) {
          scheduled = true;
          setImmediate(() => (ioRan = true));
        }
        if (ioRan) afterIo++;
        // a subscriber attached while entry 1 is half fanned out: live from the hub's position
        if (ioRan && !late) {
          late = new Recorder('id0', () => {});
          void hub.attach(late);
        }
      };
      const subs = Array.from({ length: n }, (_, i) => new Recorder(`id${i}`, onDeliver));
      for (const s of subs) await hub.attach(s);
      const audience = shape === 'to every member' ? { members: true as const } : { identities: subs.map((s) => s.identityId!) };
      await store.commit([{ op: 'append', log: JOURNAL_LOG, entry: event(audience) }]);
      await store.commit([{ op: 'append', log: JOURNAL_LOG, entry: event(audience) }]);
      await waitFor('every subscriber to have both entries', () => subs.every((s) => s.got.length === 2), (done) => done, 15_000, 10);

      expect(afterIo, 'deliveries of entry 1 made after an I/O turn ran').toBeGreaterThan(0);
      expect(afterIo).toBeLessThan(n);
      for (const s of subs) expect(s.got).toEqual([1, 2]);
      await waitFor('the late subscriber to have entry 2', () => late!.got, (g) => g.includes(2), 5000, 10);
      expect(late!.got).toEqual([2]);
      await hub.stop();
      await store.close();
    });
  }
});
