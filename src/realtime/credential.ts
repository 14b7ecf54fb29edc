/**
 * The rights an open socket or stream pushes under: its key's principal as last checked. One mechanism keeps
 * them current: an auth-changed journal entry naming the identity (any write to its keys, its identity record
 * or its membership, on any instance) and the key's own expiry both re-check the key, and nothing the hub
 * offers is shown until that check has settled. A key that no longer authenticates ends the connection with
 * the close code of its error; one that still does narrows (or widens) the connection in place.
 */
import { now } from '../clock.js';
import { AppError, isAppError } from '../errors.js';
import { principalForKey } from '../auth/keys.js';
import type { Principal } from '../identity/model.js';
import { authChangedFor, type JournalEntry } from '../journal/journal.js';
import type { Store } from '../store/port.js';
import type { Audience } from './audience.js';
import { CLOSE } from './close-codes.js';

/**
 * The longest the expiry timer waits before it looks at the wall clock again (and re-arms, with no store read, if
 * the key is not yet due): an expiry is a wall-clock time, the timer runs on the monotonic clock, so a wall clock
 * stepped forward past the expiry is noticed within this (docs/reliability.md, Time).
 */
const MAX_DELAY_MS = 60_000;

/** The close code (WebSocket, and the SSE `closed` event) for the error a re-check ended a connection with. */
export function closeCodeOf(e: AppError): number {
  if (e.code.startsWith('AUTH_KEY_')) return CLOSE.unauthorized;
  if (e.code === 'POLICY_MEMBERSHIP_REQUIRED') return CLOSE.forbidden;
  return CLOSE.internal;
}

/** A re-check that could not read the store ends the connection too: rights that cannot be confirmed are not used. */
const asAppError = (e: unknown): AppError => (isAppError(e) ? e : new AppError('DB_CONNECT_FAILED', 'The key could not be re-checked; reconnect'));

export class Credential {
  private checking: Promise<void> | undefined;
  private again = false;
  private expiry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private store: Store,
    /** the plain key, re-checked as a request's would be */
    private key: string,
    private audience: Audience,
    /** the last journal sequence whose auth change this connection has honoured: the cursor read before its key check */
    private checkedSeq: number,
    /** the connection's identity index may have moved (an admin stream demoted or promoted) */
    private moved: () => void,
    private ended: (e: AppError) => void,
  ) {
    this.arm();
  }

  /** Sync, per offered entry: starts a re-check on a newer auth change for this identity; true while one runs. */
  pending(e: JournalEntry, seq: number): boolean {
    if (seq > this.checkedSeq && authChangedFor(e, this.audience.principal.identity.id)) {
      this.checkedSeq = seq;
      this.recheck();
    }
    return this.checking !== undefined;
  }

  /** Sync: a re-check is running (nothing is shown until it settles). */
  get busy(): boolean {
    return this.checking !== undefined;
  }

  /** Resolves once no re-check is running. */
  async settled(): Promise<void> {
    while (this.checking) await this.checking;
  }

  /**
   * Rights just read by a request path (a socket op): adopted as the re-check's would be, without what belongs
   * to that request (its id, its idempotency claim), so background work done for the socket records none.
   */
  adopt(p: Principal): void {
    const before = this.audience.identityId;
    const { requestId: _rid, claim: _claim, ...rights } = p;
    this.audience.principal = rights;
    this.arm();
    if (this.audience.identityId !== before) this.moved();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.expiry);
  }

  private recheck(): void {
    if (this.checking) return void (this.again = true);
    this.checking = this.run().finally(() => (this.checking = undefined));
  }

  /** A change committed while a check was reading is checked again, so the last one wins. */
  private async run(): Promise<void> {
    do {
      this.again = false;
      try {
        const p = await principalForKey(this.store, this.key, false);
        if (!this.closed) this.adopt(p);
      } catch (e) {
        if (!this.closed) this.ended(asAppError(e));
        return this.close();
      }
    } while (this.again && !this.closed);
  }

  /** The expiry timer, derived from the key as last read: it re-checks the key when it runs out. */
  private arm(): void {
    clearTimeout(this.expiry);
    const at = this.audience.principal.key.expires_at;
    if (!at || this.closed) return;
    const due = Date.parse(at);
    this.expiry = setTimeout(() => (due <= now() ? this.recheck() : this.arm()), Math.min(Math.max(due - now(), 0), MAX_DELAY_MS));
    this.expiry.unref();
  }
}
