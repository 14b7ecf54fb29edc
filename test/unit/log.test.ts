import { afterEach, describe, expect, it, vi } from 'vitest';
import { AppError } from '../../src/errors.js';
import { createLogger, OUTAGE_LOG_WINDOW_MS } from '../../src/log.js';

function capture() {
  const lines: any[] = [];
  const log = createLogger('warn', { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { log, lines };
}

describe('logger during a store outage', () => {
  afterEach(() => void vi.useRealTimers());

  it('logs an outage error once per message per window, then says how many it stood for', () => {
    // the window runs on the monotonic clock (a wall clock stepped back must not silence the log for the step)
    vi.useFakeTimers({ toFake: ['performance'] });
    const { log, lines } = capture();
    for (let i = 0; i < 100; i++) log.warn({ err: new AppError('DB_CONNECT_FAILED') }, 'timer poll failed');
    for (let i = 0; i < 10; i++) log.warn({ err: new AppError('DB_QUERY_TIMEOUT') }, 'timer poll failed');
    log.warn({ err: new AppError('DB_CONNECT_FAILED') }, 'push hub catch-up failed');
    expect(lines.map((l) => [l.msg, l.err.code])).toEqual([
      ['timer poll failed', 'DB_CONNECT_FAILED'],
      ['timer poll failed', 'DB_QUERY_TIMEOUT'],
      ['push hub catch-up failed', 'DB_CONNECT_FAILED'],
    ]);
    vi.advanceTimersByTime(OUTAGE_LOG_WINDOW_MS);
    log.warn({ err: new AppError('DB_CONNECT_FAILED') }, 'timer poll failed');
    expect(lines).toHaveLength(4);
    expect(lines[3]).toMatchObject({ msg: 'timer poll failed', suppressed: 99, err: { code: 'DB_CONNECT_FAILED' } });
  });

  it('never holds back any other error', () => {
    const { log, lines } = capture();
    for (let i = 0; i < 20; i++) log.error({ err: new Error('boom') }, 'unhandled error');
    for (let i = 0; i < 20; i++) log.warn({ err: new AppError('SIGNAL_NOT_FOUND') }, 'timer event failed');
    expect(lines).toHaveLength(40);
  });
});
