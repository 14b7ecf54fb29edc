/**
 * Single use of proof nonces, in the store so it holds across restarts and instances on either backend:
 * a `fed-nonce:<peer>:<nonce>` record written with expect:0 (a second use loses the write), listed in the
 * `fed-nonces` index by its forget time. Each use sweeps a page of nonces whose time is past: a proof old
 * enough for its nonce to be forgotten is already outside the skew window.
 */
import { AppError } from '../errors.js';
import type { Op, Store } from '../store/port.js';
import { SKEW_MS } from './proof.js';

const INDEX = 'fed-nonces';
const SWEEP_PAGE = 100;
const nonceKey = (peerId: string, nonce: string) => `fed-nonce:${peerId}:${nonce}`;
const pad = (ms: number) => String(ms).padStart(15, '0');

export class Nonces {
  constructor(private store: Store) {}

  /** Remembers the nonce until its proof's window has closed; FED_REPLAY_DETECTED if it was seen. */
  async use(peerId: string, nonce: string, ts: number, now: number): Promise<void> {
    // the proof is acceptable while |now - ts| <= SKEW_MS: remember it at least that long
    const forgetAt = Math.max(ts, now) + SKEW_MS + 1;
    const res = await this.store.commit([
      { op: 'put', key: nonceKey(peerId, nonce), value: { forget_at: forgetAt }, expect: 0 },
      { op: 'index', index: INDEX, member: `${pad(forgetAt)}|${peerId}|${nonce}` },
    ]);
    if (!res.ok) throw new AppError('FED_REPLAY_DETECTED');
    void this.sweep(now).catch(() => undefined);
  }

  /** Forgets nonces whose window closed before `now`; answers how many. */
  async sweep(now: number): Promise<number> {
    const due = await this.store.range(INDEX, { lt: `${pad(now)}|`, limit: SWEEP_PAGE });
    if (!due.length) return 0;
    const ops = due.flatMap((m): Op[] => {
      const [, peerId, nonce] = m.split('|');
      return [
        { op: 'del', key: nonceKey(peerId, nonce) },
        { op: 'index', index: INDEX, member: m, remove: true },
      ];
    });
    await this.store.commit(ops);
    return due.length;
  }
}
