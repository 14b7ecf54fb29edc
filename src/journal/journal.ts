/**
 * The push journal: one commit-ordered log that every change worth pushing appends to, in the same store commit
 * as the change itself (so it is also the outbox webhooks read). Signal entries carry the Signal and its route;
 * every other part appends an event entry naming its subject, its data and who may see it.
 */
import type { Principal } from '../identity/model.js';
import type { Signal } from '../signals/kind.js';
import { AppError } from '../errors.js';
import type { LogEntry, Op, Store } from '../store/port.js';

/** The log's stored name; its sequence is the cursor clients resume from. */
export const JOURNAL_LOG = 'signals';

export interface SignalEntry {
  type: 'signal' | 'signal.updated';
  signal: Signal;
  route: { role_id: string | null; ring_id: string | null };
  /** the delivery state before this change (absent on a new signal) */
  prev_state?: string;
  /**
   * on a `delivered` mark made by a push: the journal sequence of the pushed entry. A socket or stream that was
   * sent that entry live is not sent the mark (docs/realtime.md, Delivery).
   */
  pushed_at?: number;
}

/** The entry a push of a pending signal to its recipient sends, which the push then marks `delivered`. */
export const isDeliverablePush = (e: JournalEntry): e is SignalEntry => isSignalEntry(e) && e.signal.delivery_state === 'pending' && (e.type === 'signal' || e.prev_state === 'waiting');

/** Who is shown an event besides admins' all-seeing streams: any of these matches. */
export interface EventAudience {
  identities?: string[];
  /** role ids: their fillers */
  roles?: string[];
  /** ring ids: their members */
  rings?: string[];
  /** every identity with an active membership */
  members?: boolean;
}

export interface EventEntry {
  type: string;
  /** the frame's field naming the data (`memory`, `artifact`, ...) */
  subject: string;
  /** absent only as stored with `same_signal` */
  data?: unknown;
  audience: EventAudience;
  /** a memory namespace the entry belongs to: a key's memory_scopes narrow who sees it */
  memory_namespace?: string;
  /**
   * stored only: the data is the Signal of the signal entry this one follows in the same commit (a task's
   * completion, a federation step), which the journal then holds once; its readers put it back (`SignalRun`)
   */
  same_signal?: true;
}

/** An event entry whose data is the Signal of the signal entry journaled just before it (`same_signal`). */
export const sameSignalEvent = (type: string, audience: EventAudience): EventEntry => ({ type, subject: 'signal', audience, same_signal: true });

export type JournalEntry = SignalEntry | EventEntry;

export const isSignalEntry = (e: JournalEntry): e is SignalEntry => 'signal' in e;

/**
 * The only identities an entry can be shown to, besides all-seeing streams; undefined when a broadcast, a
 * role, a ring or every member may see it. The hub offers a narrow entry to those identities' sockets alone
 * (it must name everyone `Audience.wants` could accept: the recipient, and the sender and claimer of an update).
 */
export function shownOnlyTo(e: JournalEntry): (string | null)[] | undefined {
  if (isSignalEntry(e)) {
    const s = e.signal;
    const wide = e.route.role_id !== null || e.route.ring_id !== null || (s.to_identity === null && !s.to_peer);
    return wide ? undefined : [s.to_identity, s.from_identity, s.claimed_by];
  }
  const a = e.audience;
  return a.members || a.roles?.length || a.rings?.length ? undefined : (a.identities ?? []);
}

/** entries one move journals after its signal entry, at most: how far back a `same_signal` entry's signal is */
const RUN_MAX = 8;

/** The entries up to RUN_MAX before `seq`, and with `through` the one at `seq` too. */
function readBack(store: Store, seq: number, through = false): Promise<LogEntry<JournalEntry>[]> {
  const from = Math.max(0, seq - 1 - RUN_MAX);
  const n = seq - 1 - from + (through ? 1 : 0);
  if (n <= 0) return Promise.resolve([]); // a limit of 0 is no limit to Redis's XRANGE
  // once the journal starts after `from`, n entries read from there reach past `seq`
  const last = through ? seq : seq - 1;
  return store.readLog<JournalEntry>(JOURNAL_LOG, from, n).then((page) => page.filter((e) => e.seq <= last));
}

/** The last signal entry of `page` before `seq`: the one a `same_signal` entry at `seq` follows. */
function signalBefore(page: LogEntry<JournalEntry>[], seq: number): LogEntry<SignalEntry> | undefined {
  for (let i = page.length - 1; i >= 0; i--) if (page[i].seq < seq && isSignalEntry(page[i].entry)) return page[i] as LogEntry<SignalEntry>;
  return undefined;
}

/** Where a trim of the journal before `seq` may cut: never between a `same_signal` entry and its signal entry. */
export async function trimPoint(store: Store, seq: number): Promise<number> {
  const page = await readBack(store, seq, true);
  const at = page.at(-1);
  if (!at || at.seq !== seq || isSignalEntry(at.entry) || !at.entry.same_signal) return seq;
  return signalBefore(page, seq)?.seq ?? seq;
}

/**
 * Puts back the Signal of `same_signal` entries for one reader of the journal in sequence order: the Signal of
 * the signal entry it read last stands for them, and where it did not read the entry just before (a page's
 * first, one after a gap) the journal is read. A signal entry trimmed away ends the reader's position: the
 * cursor expired.
 */
export class SignalRun {
  /** the Signal the entry at `seq` carries or stands for */
  private last: { seq: number; signal: Signal } | undefined;
  constructor(private store: Store) {}

  async take(e: LogEntry<JournalEntry>): Promise<LogEntry<JournalEntry>> {
    const x = e.entry;
    if (isSignalEntry(x)) this.last = { seq: e.seq, signal: x.signal };
    if (isSignalEntry(x) || !x.same_signal) return e;
    const signal = this.last?.seq === e.seq - 1 ? this.last.signal : signalBefore(await readBack(this.store, e.seq), e.seq)?.entry.signal;
    if (!signal) throw new AppError('PUSH_CURSOR_EXPIRED', undefined, { oldest_cursor: String((await this.store.logStart(JOURNAL_LOG)) - 1) });
    this.last = { seq: e.seq, signal };
    const { same_signal: _, ...rest } = x;
    return { seq: e.seq, entry: { ...rest, data: signal } };
  }

  async page(entries: LogEntry<JournalEntry>[]): Promise<LogEntry<JournalEntry>[]> {
    const out: LogEntry<JournalEntry>[] = [];
    for (const e of entries) out.push(await this.take(e));
    return out;
  }
}

/** A page of the journal as its readers see it (`same_signal` entries with their data). */
export const readJournal = async (store: Store, after: number, limit: number): Promise<LogEntry<JournalEntry>[]> => new SignalRun(store).page(await store.readLog<JournalEntry>(JOURNAL_LOG, after, limit));

/** The subject and data a push frame carries. */
export const frameOf = (e: JournalEntry): { subject: string; data: unknown } => (isSignalEntry(e) ? { subject: 'signal', data: e.signal } : { subject: e.subject, data: e.data });

/** The append op that records an event in the commit of the change it reports. */
export const eventOp = (e: EventEntry): Op => ({ op: 'append', log: JOURNAL_LOG, entry: e });

/**
 * Whether a key's memory_scopes (exact names or `prefix*`) cover a namespace; an empty list covers all. The one
 * scope rule of memory: the namespace ACL's reads (`GET /memory/:id`) and memory events' pushes both use it.
 */
export function memoryScopeCovers(scopes: string[], namespace: string): boolean {
  return !scopes.length || scopes.some((s) => (s.endsWith('*') ? namespace.startsWith(s.slice(0, -1)) : s === namespace));
}

/** Whether an identity with these roles and rings is in an event's audience. */
export function inAudience(e: EventEntry, p: Principal, reach: { roles: string[]; rings: string[] }): boolean {
  const a = e.audience;
  if (e.memory_namespace !== undefined && !memoryScopeCovers(p.key.permissions.memory_scopes, e.memory_namespace)) return false;
  return (
    (a.members === true && p.membership?.status === 'active') ||
    (a.identities?.includes(p.identity.id) ?? false) ||
    (a.roles?.some((r) => reach.roles.includes(r)) ?? false) ||
    (a.rings?.some((r) => reach.rings.includes(r)) ?? false)
  );
}

/**
 * An identity's access ended (deleted, membership suspended or removed): an event admin streams see,
 * appended in the commit that ends the access (the membership kind's journal, the identity's deletion).
 * Connections do not close on it: the commit's `auth.changed` entry re-checks them.
 */
export const ACCESS_ENDED = 'identity.access_ended';
export type AccessEndedReason = 'deleted' | 'suspended' | 'removed';

export const accessEndedEntry = (identityId: string, reason: AccessEndedReason): EventEntry => ({
  type: ACCESS_ENDED,
  subject: 'identity',
  data: { identity_id: identityId, reason },
  audience: { identities: [identityId] },
});

export const accessEndedOp = (identityId: string, reason: AccessEndedReason): Op => eventOp(accessEndedEntry(identityId, reason));

/**
 * A commit wrote an API key, an identity or a membership (`authGenerationRule` appends it after the
 * commit's own ops): every open socket and stream of the named identities (all of them when `identity_ids` is null)
 * re-checks its key before it is shown anything committed after it. Never pushed.
 */
export const AUTH_CHANGED = 'auth.changed';

export const authChangedEntry = (identityIds: string[] | null): EventEntry => ({
  type: AUTH_CHANGED,
  subject: 'identity',
  data: { identity_ids: identityIds },
  audience: identityIds ? { identities: identityIds } : { members: true },
});

export const isAuthChanged = (e: JournalEntry): boolean => !isSignalEntry(e) && e.type === AUTH_CHANGED;

/**
 * A commit changed the roles an identity fills or the rings it belongs to (`reachChangeRule` appends it):
 * every process's push reloads those identities' reach before it offers anything committed after it. Never pushed.
 */
export const REACH_CHANGED = 'reach.changed';

export const reachChangedEntry = (identityIds: string[]): EventEntry => ({
  type: REACH_CHANGED,
  subject: 'identity',
  data: { identity_ids: identityIds },
  audience: { identities: identityIds },
});

/** The identities whose reach this entry says changed; undefined for any other entry. */
export const reachChangedIds = (e: JournalEntry): string[] | undefined =>
  !isSignalEntry(e) && e.type === REACH_CHANGED ? (e.data as { identity_ids: string[] }).identity_ids : undefined;

/** The service's own bookkeeping entries, never shown to a client. */
export const isInternal = (e: JournalEntry): boolean => !isSignalEntry(e) && (e.type === AUTH_CHANGED || e.type === REACH_CHANGED);

/** Whether this entry asks the identity's connections to re-check their key. */
export function authChangedFor(e: JournalEntry, identityId: string): boolean {
  if (!isAuthChanged(e)) return false;
  const ids = ((e as EventEntry).data as { identity_ids: string[] | null }).identity_ids;
  return ids === null || ids.includes(identityId);
}

/**
 * `render` remembered for the last entry it was given: the hub offers one entry to every subscriber in turn,
 * and its pushed bytes are the same for each, so they are made (and UTF-8 encoded) once per entry instead of
 * once per subscriber.
 */
export function perEntry(render: (e: JournalEntry, seq: number) => string): (e: JournalEntry, seq: number) => Buffer {
  let last: { e: JournalEntry; seq: number; bytes: Buffer } | undefined;
  return (e, seq) => {
    if (last?.e !== e || last.seq !== seq) last = { e, seq, bytes: Buffer.from(render(e, seq)) };
    return last.bytes;
  };
}
