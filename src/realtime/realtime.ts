/** Wires the push channels: one hub per process, WebSocket and SSE on the same uWS app. */
import type { TemplatedApp } from 'uWebSockets.js';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { Org } from '../org/service.js';
import type { Inbox } from '../signals/inbox.js';
import type { Signals } from '../signals/service.js';
import type { Store } from '../store/port.js';
import type { Exchange } from '../http/uws.js';
import type { Links } from '../http/links.js';
import { Audience, ReachCache } from './audience.js';
import { Deliverer } from './deliverer.js';
import { Hub, type Subscriber } from './hub.js';
import type { RateLimits } from '../auth/rate-limit.js';
import { isSignalEntry, type JournalEntry } from '../journal/journal.js';
import type { Principal } from '../identity/model.js';
import type { Signal } from '../signals/kind.js';
import type { Presence } from '../presence/presence.js';
import { mountSse } from './sse.js';
import { Origins } from '../http/origin.js';
import { mountWebSocket } from './ws.js';

export class Realtime {
  readonly hub: Hub;
  readonly reach: ReachCache;
  readonly deliverer: Deliverer;
  /** an upgrade or stream from a browser page of another origin is refused (DNS rebinding) */
  readonly origins: Origins;

  constructor(
    readonly config: Readonly<Config>,
    readonly store: Store,
    readonly log: Logger,
    org: Org,
    readonly signals: Signals,
    readonly inbox: Inbox,
    readonly presence: Presence,
    private links: Links,
    /** a WebSocket op spends from the same per-key budget as a request */
    readonly limits: RateLimits,
  ) {
    this.hub = new Hub(store, log, config.journalRetainEntries);
    this.reach = new ReachCache(org);
    this.deliverer = new Deliverer(signals);
    this.origins = new Origins(links, config.allowedOrigins);
  }

  get docsBase(): string {
    return this.links.docsBase;
  }

  async start(app: TemplatedApp, fail: (x: Exchange, rid: string, e: unknown) => void): Promise<void> {
    await this.hub.start();
    mountWebSocket(app, this);
    mountSse(app, this, fail);
  }

  /** One signal's committed changes as they happen (A2A task streams); call the answer to stop. */
  watchSignal(signalId: string, onChange: (s: Signal) => void): () => void {
    return this.watch(
      (e) => isSignalEntry(e) && e.signal.id === signalId,
      (e) => isSignalEntry(e) && onChange(e.signal),
    );
  }

  /**
   * Every committed journal entry from now on, for one principal (MCP resource subscriptions), told lazily
   * whether this principal's own push would show it (admins see all) and whether it lands in its inbox.
   */
  watchJournal(p: Principal, onEntry: (e: JournalEntry, seen: { shown: boolean; recipient: boolean }) => void): () => void {
    const audience = new Audience(p, this.reach, p.identity.is_admin);
    return this.watch(
      () => true,
      (e) =>
        onEntry(e, {
          get shown() {
            return audience.wants(e);
          },
          get recipient() {
            return audience.isRecipient(e);
          },
        }),
    );
  }

  /** An in-process hub subscriber that never falls behind (it only calls back); call the answer to stop. */
  private watch(wants: (e: JournalEntry) => boolean, onEntry: (e: JournalEntry) => void): () => void {
    let open = true;
    const sub: Subscriber = {
      lastSeq: 0,
      get open() {
        return open;
      },
      wants,
      deliver: (e) => {
        onEntry(e);
        return 'sent';
      },
      room: async () => open,
      fail: () => (open = false),
    };
    void this.hub.attach(sub);
    return () => {
      open = false;
      this.hub.detach(sub);
    };
  }

  stop(): Promise<void> {
    return this.hub.stop();
  }
}
