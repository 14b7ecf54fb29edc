/** The push hub trims the journal to JOURNAL_RETAIN_ENTRIES but never past a floor another reader (the webhook outbox) holds. */
import { rm } from 'node:fs/promises';
import { afterAll, describe, it } from 'vitest';
import { JOURNAL_LOG } from '../../src/journal/journal.js';
import { createLogger } from '../../src/log.js';
import { Hub } from '../../src/realtime/hub.js';
import { openEmbeddedStore } from '../../src/store/embedded.js';
import { tempDir } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

describe('journal trim and the outbox floor', () => {
  const dirs: string[] = [];
  afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  it('trims to the retained window, stopping at the floor while it is held', async () => {
    const dir = await tempDir('svc-hub-');
    dirs.push(dir);
    const store = await openEmbeddedStore(dir);
    const hub = new Hub(store, createLogger('silent'), 10);
    let floor: number | undefined = 5;
    hub.holdTrimAt(async () => floor);
    await hub.start();
    for (let i = 0; i < 40; i++) await store.commit([{ op: 'append', log: JOURNAL_LOG, entry: { type: 'test', subject: 'x', data: i, audience: {} } }]);
    // the window alone would drop everything below 31; the floor keeps 5 onwards
    await waitFor('a trim held at the floor', () => store.logStart(JOURNAL_LOG), (start) => start === 5, 5000, 50);
    floor = 20;
    await waitFor('a trim up to the moved floor', () => store.logStart(JOURNAL_LOG), (start) => start === 20, 5000, 50);
    floor = undefined;
    await waitFor('the full trim once nothing holds it', () => store.logStart(JOURNAL_LOG), (start) => start === 31, 5000, 50);
    await hub.stop();
    await store.close();
  });
});
