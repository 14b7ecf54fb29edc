/**
 * Inboxes are read-time merges of the signal indexes an identity is reached through: its direct inbox,
 * the broadcast inbox, and the inboxes of the roles it fills and the rings it belongs to. Receipts are
 * per identity and signal; none means unread.
 */
import { newReceipt, type ReceiptContext } from '../../actors/inbox-receipt.js';
import type { SignalContext } from '../../actors/signal.js';
import { AppError } from '../errors.js';
import { commaList } from '../validation.js';
import { now } from '../clock.js';
import { keys as identityKeys, type Identity, type Principal } from '../identity/model.js';
import { sameName } from '../org/model.js';
import type { Org } from '../org/service.js';
import type { ActorRecord, Runtime } from '../runtime/runtime.js';
import { scanDesc, scanLimits, type Scanned } from '../store/scan.js';
import type { Versioned } from '../store/port.js';
import { idOfInboxMember, idOfReadyMember, isOpenTask, readyRank, SIGNAL, signalIndexes, signalView, type Signal } from './kind.js';
import { assertFilterInScope, assertInScope, outOfScope } from './policy.js';
import { reaches, takersOf } from './routing.js';
import { overdueFor, RECEIPT, receiptId, receiptIndexes, receiptView, type Receipt } from './receipt-kind.js';
import type { Signals } from './service.js';
import { keyAtLimit } from './concurrency.js';

/** The task types a ready read takes: those asked for, narrowed to the key's task_types; undefined reads every open task. */
export function takeableTypes(asked: string[] | undefined, keyTypes: string[]): string[] | undefined {
  const wanted = asked?.length ? asked : undefined;
  if (!keyTypes.length) return wanted;
  return wanted ? wanted.filter((t) => keyTypes.includes(t)) : keyTypes;
}

export type ReceiptState = 'unread' | 'acknowledged' | 'resolved' | 'snoozed';

export interface InboxQuery {
  types?: string[];
  ring?: string;
  tag?: string;
  delivery_state?: string;
  min_urgency?: number;
  project_tag?: string;
  receipt_state?: ReceiptState;
  include_resolved?: boolean;
  include_snoozed?: boolean;
  view?: 'full' | 'summary';
  /** comma list of how signals were addressed to keep: direct, role, ring, broadcast (default all) */
  scope?: string;
  /** true: only what the reader owes an acknowledgement for past its due time; false: everything else */
  ack_overdue?: boolean;
}

export type InboxScope = 'direct' | 'role' | 'ring' | 'broadcast';

/** How a signal was addressed (one signal may be addressed to an identity and a role at once). */
export function scopesOf(c: Pick<SignalContext, 'to_identity' | 'to_role_id' | 'to_ring_id'>): InboxScope[] {
  const out: InboxScope[] = [];
  if (c.to_identity) out.push('direct');
  if (c.to_role_id) out.push('role');
  if (c.to_ring_id) out.push('ring');
  if (!out.length) out.push('broadcast');
  return out;
}

const scopeOf = (q: InboxQuery): Set<InboxScope> | undefined => (q.scope ? new Set(commaList(q.scope) as InboxScope[]) : undefined);

export type InboxItem = Signal & { receipt_state: ReceiptState; snoozed_until: string | null; ack_overdue: boolean };

interface Row {
  signal: ActorRecord<SignalContext>;
  receipt: ActorRecord<ReceiptContext> | undefined;
  /** who took an any_one signal, if anyone has */
  taker: string | undefined;
}

type Action = 'ACKNOWLEDGE' | 'RESOLVE' | 'SNOOZE' | 'UNSNOOZE';

export class Inbox {
  constructor(
    private rt: Runtime,
    private org: Org,
    private signals: Signals,
  ) {}

  /** Indexes the identity is reached through. */
  async reachOf(identityId: string): Promise<{ indexes: string[]; roles: string[]; rings: string[] }> {
    const { roles, rings } = await this.org.placesOf(identityId);
    return {
      roles,
      rings,
      indexes: [signalIndexes.identityInbox(identityId), signalIndexes.broadcast, ...roles.map(signalIndexes.roleInbox), ...rings.map(signalIndexes.ringInbox)],
    };
  }

  /** Whether a signal lands in this identity's inbox: direct, broadcast, or a role/ring it holds with the capabilities asked for. */
  static reaches = reaches;

  async identityInbox(p: Principal, target: string, q: InboxQuery, before: string | undefined, limit: number): Promise<Scanned<InboxItem>> {
    const who = await this.resolveIdentity(target);
    if (who.id !== p.identity.id && !p.identity.is_admin) throw new AppError('POLICY_DENIED', 'Only the identity itself or an admin may read its inbox');
    const reach = await this.reachOf(who.id);
    const scope = scopeOf(q);
    // only the indexes the scope names are read: a direct-only inbox never scans the broadcast index
    const indexes = !scope
      ? reach.indexes
      : [
          ...(scope.has('direct') ? [signalIndexes.identityInbox(who.id)] : []),
          ...(scope.has('broadcast') ? [signalIndexes.broadcast] : []),
          ...(scope.has('role') ? reach.roles.map(signalIndexes.roleInbox) : []),
          ...(scope.has('ring') ? reach.rings.map(signalIndexes.ringInbox) : []),
        ];
    // an any_one signal someone else took has left this inbox
    return this.read(p, who, q.ack_overdue === true ? [receiptIndexes.ackOverdue(who.id)] : indexes, visibleTo(who, reach), q, before, limit, true);
  }

  /**
   * The caller's tasks claimable now, highest priority first, then most urgent (equal rank in random order, so
   * concurrent callers start on different ones), as its inbox shows them; reading marks nothing delivered. A few
   * index members are read per step and a signal is loaded only when the walk reaches it, so finding the first
   * costs a handful of reads however many tasks are open. `skip` passes over tasks without reading them.
   * `taskTypes` reads only those types' indexes, so types that match nothing cost no walk; at most
   * `scanCap` members are examined per call. A task whose concurrency_key is at its limit is passed over
   * (`keys`: the leased tasks of each key read so far, which the caller may update from a refused claim).
   */
  async *openTasks(p: Principal, skip: (signalId: string) => boolean, taskTypes?: string[], keys = new Map<string, string[]>()): AsyncGenerator<Versioned<ActorRecord<SignalContext>>> {
    for await (const { stored } of this.walkReady(p, skip, taskTypes, { spread: true, keys })) yield stored;
  }

  /** What the caller may claim now (GET /tasks/ready): a page in ready order, the scan bounded as `openTasks`'s. */
  async ready(p: Principal, q: { task_types?: string[] }, after: string | undefined, limit: number): Promise<Scanned<Signal>> {
    this.signals.requireMember(p);
    const types = takeableTypes(q.task_types, p.key.permissions.task_types);
    if (types?.length === 0) return { items: [], cursor: null };
    const items: Signal[] = [];
    const walk = { last: undefined as string | undefined, capped: false };
    for await (const { stored, member } of this.walkReady(p, () => false, types, { spread: false, after, walk })) {
      items.push(signalView(stored.value));
      if (items.length === limit) return { items, cursor: member };
    }
    return { items, cursor: walk.capped ? (walk.last ?? null) : null };
  }

  private async *walkReady(
    p: Principal,
    skip: (signalId: string) => boolean,
    taskTypes: string[] | undefined,
    o: { spread: boolean; after?: string; walk?: { last: string | undefined; capped: boolean }; keys?: Map<string, string[]> },
  ): AsyncGenerator<{ stored: Versioned<ActorRecord<SignalContext>>; member: string }> {
    const reach = await this.reachOf(p.identity.id);
    const visible = visibleTo(p.identity, reach);
    const indexes = taskTypes ? reach.indexes.flatMap((i) => taskTypes.map((t) => signalIndexes.openTasksOfType(i, t))) : reach.indexes.map(signalIndexes.openTasks);
    let before = o.after;
    // a task whose concurrency_key has no slot free is passed over, so tasks of other keys behind it are reached
    const keys = o.keys ?? new Map<string, string[]>();
    for (let examined = 0; ; examined += OPEN_TASK_STEP) {
      if (examined >= scanLimits.scanCap) {
        if (o.walk) o.walk.capped = true;
        return;
      }
      const lists = await Promise.all(indexes.map((index) => this.rt.store.range(index, { lt: before, reverse: true, limit: OPEN_TASK_STEP })));
      const members = [...new Set(lists.flat())].sort((a, b) => (a < b ? 1 : a > b ? -1 : 0)).slice(0, OPEN_TASK_STEP);
      if (!members.length) return;
      before = members[members.length - 1];
      const order = o.spread ? spreadTies(members) : members;
      for (let at = 0; at < order.length; at += READ_BATCH) {
        // candidates are read a few at a time, each batch in one read per kind: a walk that stops at its first
        // claimable task reads little more than it, one that fills many credits waits once per batch, not per task
        const batch = order.slice(at, at + READ_BATCH).filter((m) => !skip(idOfReadyMember(m)));
        const ids = batch.map(idOfReadyMember);
        const [signals, receipts] = await Promise.all([this.rt.loadStoredMany<SignalContext>(SIGNAL, ids), this.rt.loadMany<ReceiptContext>(RECEIPT, ids.map((id) => receiptId(p.identity.id, id)))]);
        const takers = await takersOf(this.rt.store, signals.map((r) => r?.value.context));
        for (let i = 0; i < batch.length; i++) {
          if (o.walk) o.walk.last = batch[i];
          const stored = signals[i];
          const signal = stored?.value;
          // skip again: the consumer may have taken this task while the batch before it was handed out
          if (!stored || !signal || skip(ids[i]) || !isOpenTask(signal.value, signal.context)) continue;
          if (!visible(signal.context, takers[i]) || outOfScope(p.key, signal.context) || !matchesInbox({ signal, receipt: receipts[i], taker: takers[i] }, {})) continue;
          if (!(await keyAtLimit(this.rt.store, signal.context, keys))) yield { stored, member: batch[i] };
        }
        if (o.walk && at + READ_BATCH >= order.length) o.walk.last = order[order.length - 1];
      }
      if (members.length < OPEN_TASK_STEP) return;
    }
  }

  async roleInbox(p: Principal, roleName: string, q: InboxQuery, before: string | undefined, limit: number): Promise<Scanned<InboxItem>> {
    const role = await this.org.roleByName(roleName);
    if (!role) throw new AppError('SIGNAL_NOT_FOUND', `No role named "${roleName}"`, { field: 'target' });
    const fills = await this.org.fillersOf(role.id);
    // the overdue index is the reader's own: kept to this role by the signal's route
    const indexes = q.ack_overdue === true ? [receiptIndexes.ackOverdue(p.identity.id)] : [signalIndexes.roleInbox(role.id)];
    return this.read(p, p.identity, indexes, (c) => c.to_role_id === role.id, q, before, limit, fills.includes(p.identity.id));
  }

  private async resolveIdentity(target: string): Promise<Identity> {
    let id = target;
    if (target.startsWith('@')) {
      const ref = await this.rt.store.get<{ id: string }>(identityKeys.identityName(target.slice(1)));
      if (!ref) throw new AppError('SIGNAL_NOT_FOUND', `No identity named "${target.slice(1)}"`, { field: 'target' });
      id = ref.value.id;
    }
    const rec = await this.rt.store.get<Identity>(identityKeys.identity(id));
    if (!rec) throw new AppError('SIGNAL_NOT_FOUND', `No identity ${id}`, { field: 'target' });
    return rec.value;
  }

  private async read(p: Principal, reader: Pick<Identity, 'id'>, indexes: string[], visible: (c: SignalContext, taker: string | undefined) => boolean, q: InboxQuery, before: string | undefined, limit: number, delivers: boolean): Promise<Scanned<InboxItem>> {
    assertFilterInScope(p.key, { types: q.types, ring: q.ring });
    const res = await scanDesc<Row>(this.rt.store, indexes, {
      before,
      limit,
      load: async (members) => {
        const ids = members.map(idOfInboxMember);
        const [signals, receipts] = await Promise.all([
          this.rt.loadMany<SignalContext>(SIGNAL, ids),
          this.rt.loadMany<ReceiptContext>(RECEIPT, ids.map((id) => receiptId(reader.id, id))),
        ]);
        const takers = await takersOf(this.rt.store, signals.map((s) => s?.context));
        return ids.map((_, i) => (signals[i] ? { signal: signals[i]!, receipt: receipts[i], taker: takers[i] } : undefined));
      },
      keep: (row) => visible(row.signal.context, row.taker) && !outOfScope(p.key, row.signal.context) && matchesInbox(row, q),
    });
    const signals = delivers && reader.id === p.identity.id ? await this.signals.markDelivered(res.items.map((r) => r.signal), p.requestId) : res.items.map((r) => r.signal);
    return {
      cursor: res.cursor,
      items: signals.map((s, i) => {
        const receipt = res.items[i].receipt;
        const view: Signal = signalView(s);
        const item = { ...view, receipt_state: (receipt?.value ?? 'unread') as ReceiptState, snoozed_until: receipt?.context.snoozed_until ?? null, ...ackOf(receipt, res.items[i].taker) };
        if (q.view === 'summary') {
          const { content: _c, payload: _p, ...summary } = item;
          return summary as InboxItem;
        }
        return item;
      }),
    };
  }

  async act(p: Principal, action: Action, signalId: string, until?: number): Promise<Receipt> {
    this.signals.requireMember(p);
    const signal = await this.signals.load(signalId);
    assertInScope(p.key, signal.context);
    if (action === 'SNOOZE' && (until === undefined || until <= now())) throw new AppError('VALIDATION_INVALID_TYPE', 'until must be a future timestamp', { field: 'until', reason: 'future' });
    const c = await this.rt.send<ReceiptContext>(RECEIPT, receiptId(p.identity.id, signalId), { type: action, until }, { requestId: p.requestId, create: () => newReceipt(p.identity.id, signalId, now()) });
    if (action === 'ACKNOWLEDGE' || action === 'RESOLVE') await this.signals.takeIfRecipient(p, signal.context);
    if (signal.value === 'pending' && reaches(signal.context, p.identity, await this.reachOf(p.identity.id))) await this.signals.markDelivered([signal], p.requestId);
    return receiptView(c!.record, p.identity.id, signalId);
  }
}

/** On an inbox item the acknowledgement fields are the reader's: only a recipient asked at emit owes one. */
function ackOf(receipt: ActorRecord<ReceiptContext> | undefined, taker: string | undefined) {
  const c = receipt?.context;
  return { ack_required: c?.ack_required ?? false, ack_due_at: c?.ack_due_at ?? null, ack_overdue: c !== undefined && overdueFor(c, taker) };
}

function matchesInbox({ signal, receipt, taker }: Row, q: InboxQuery): boolean {
  const c = signal.context;
  if (q.ack_overdue !== undefined && (receipt !== undefined && overdueFor(receipt.context, taker)) !== q.ack_overdue) return false;
  const state: ReceiptState = (receipt?.value as ReceiptState) ?? 'unread';
  const scope = scopeOf(q);
  if (scope && !scopesOf(c).some((s) => scope.has(s))) return false;
  if (q.receipt_state ? state !== q.receipt_state : (state === 'resolved' && !q.include_resolved) || (state === 'snoozed' && !q.include_snoozed)) return false;
  return (
    (!q.types?.length || q.types.includes(c.signal_type)) &&
    (!q.ring || sameName(c.to_ring, q.ring)) &&
    (!q.tag || c.tags.includes(q.tag)) &&
    (!q.project_tag || c.tags.includes(`project:${q.project_tag}`)) &&
    (!q.delivery_state || signal.value === q.delivery_state) &&
    (q.min_urgency === undefined || c.urgency >= q.min_urgency)
  );
}

/** index members read per step of the open-task walk */
const OPEN_TASK_STEP = 32;
/** candidates of a step whose records are read together */
const READ_BATCH = 8;

/** Members of equal rank (priority and urgency) in random order. */
function spreadTies(members: string[]): string[] {
  const out = [...members];
  for (let start = 0; start < out.length; ) {
    let end = start + 1;
    while (end < out.length && readyRank(out[end]) === readyRank(out[start])) end++;
    for (let i = end - 1; i > start; i--) {
      const j = start + Math.floor(Math.random() * (i - start + 1));
      [out[i], out[j]] = [out[j], out[i]];
    }
    start = end;
  }
  return out;
}

/** What an identity's inbox shows: what reaches it, less an any_one signal someone else took. */
const visibleTo = (who: Pick<Identity, 'id' | 'capabilities'>, reach: { roles: string[]; rings: string[] }) => (c: SignalContext, taker: string | undefined) =>
  reaches(c, who, reach) && (taker === undefined || taker === who.id);
