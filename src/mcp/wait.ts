/**
 * `svc_wait`, core's wait-for-new-items tool: the MCP form of `svc wait`. One tool call holds until an
 * unacknowledged item addressed to the caller arrives, or a bounded timeout passes. It watches the push
 * hub's journal for the caller (the feed `/ws` and `svc wait` read) and reads the unread inbox only when an
 * entry for the caller commits, so it never polls. A session remembers what its waits returned, so no item
 * is returned twice to one session.
 */
import Type from 'typebox';
import type { Principal } from '../identity/model.js';
import { isSignalEntry, type JournalEntry } from '../journal/journal.js';
import { compile, Key } from '../validation.js';
import { invoke, resolve, type MethodTable } from '../surface/methods.js';
import { worthWaking } from '../../actors/signal-wake.js';

/** The longest wait: under the MCP clients' own request timeout (60 s in the official SDKs). */
export const MAX_WAIT_S = 50;
const DEFAULT_WAIT_S = 25;
/** ids one session remembers as returned, as `svc wait`'s state file */
const MAX_SHOWN = 2000;

export const WaitParams = compile(
  Type.Object(
    {
      types: Type.Optional(Type.Array(Key('signal_type'), { maxItems: 20 })),
      timeout_s: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_WAIT_S, description: `default ${DEFAULT_WAIT_S}` })),
    },
    { additionalProperties: false },
  ),
);
export const WAIT_DESCRIPTION = `Wait until new unacknowledged signals or tasks reach the caller (or timeout_s passes): {signals, count, timed_out}. Each item is returned once per session.`;

type Watch = (p: Principal, key: string, onEntry: (e: JournalEntry, seen: { shown: boolean; recipient: boolean }) => void, onEnded: () => void) => () => void;
type Item = { id: string; signal_type: string; from_identity: string; delivery_state?: string; task_status?: string | null; claimed_by?: string | null };

export class Waiter {
  private shown = new Set<string>();

  constructor(
    private table: MethodTable,
    private watch: Watch,
  ) {}

  /** The new items, or an empty list when the timeout (or the client's cancel) came first. */
  wait(p: Principal, key: string, q: { types?: string[]; timeout_s?: number }, cancel: AbortSignal): Promise<{ signals: Item[]; count: number; timed_out: boolean }> {
    const me = p.identity.id;
    const fresh = async () => {
      const box = (await invoke(resolve(this.table, 'inbox.check', { receipt_state: 'unread', limit: 50, ...(q.types?.length ? { type: q.types.join(',') } : {}) })!, p)) as { signals: Item[] };
      return box.signals.filter((s) => s.from_identity !== me && !this.shown.has(s.id) && worthWaking(s, me));
    };
    return new Promise((done, fail) => {
      let finished = false;
      let reading = false;
      let again = false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const finish = (items: Item[], error?: unknown) => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        cancel.removeEventListener('abort', onCancel);
        stop();
        if (error !== undefined) return fail(error);
        this.remember(items);
        done({ signals: items, count: items.length, timed_out: !items.length });
      };
      // one inbox read at a time; entries that commit during a read ask for one more
      const check = async () => {
        if (reading) return void (again = true);
        reading = true;
        try {
          do {
            again = false;
            const items = await fresh();
            if (items.length) return finish(items);
          } while (again && !finished);
        } catch (e) {
          finish([], e);
        } finally {
          reading = false;
        }
      };
      const onCancel = () => finish([]);
      let stop = () => {};
      // watching starts before the first read, so an item committed in between still wakes it
      stop = this.watch(p, key, (e, seen) => void (!finished && isSignalEntry(e) && (seen.recipient || seen.shown) && check()), () => finish([]));
      if (finished) return stop();
      timer = setTimeout(() => finish([]), (q.timeout_s ?? DEFAULT_WAIT_S) * 1000);
      cancel.addEventListener('abort', onCancel);
      void check();
    });
  }

  private remember(items: Item[]): void {
    for (const s of items) this.shown.add(s.id);
    for (const id of this.shown) {
      if (this.shown.size <= MAX_SHOWN) break;
      this.shown.delete(id);
    }
  }
}
