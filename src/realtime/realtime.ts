/** Wires the push channels: one hub per process, WebSocket and SSE on the same uWS app. */
import type { HttpResponse, TemplatedApp } from 'uWebSockets.js';
import type { Config } from '../config.js';
import type { AppError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Org } from '../org/service.js';
import type { Inbox } from '../signals/inbox.js';
import type { Signals } from '../signals/service.js';
import type { Store } from '../store/port.js';
import type { Exchange } from '../http/uws.js';
import type { Links } from '../http/links.js';
import { Audience, ReachCache } from './audience.js';
import { Credential } from './credential.js';
import { Deliverer } from './deliverer.js';
import { Hub, type Subscriber } from './hub.js';
import type { RateLimits } from '../auth/rate-limit.js';
import { isSignalEntry, reachChangedIds, type JournalEntry } from '../journal/journal.js';
import type { Principal } from '../identity/model.js';
import type { Signal } from '../signals/kind.js';
import type { Presence } from '../presence/presence.js';
import { mountSse } from './sse.js';
import { Origins } from '../http/origin.js';
import { canonicalIp, clientAddress } from '../http/client-address.js';
import { HeldConnections } from './held.js';
import { mountWebSocket } from './ws.js';
import { TaskDispatch } from './dispatch.js';

export class Realtime {
  readonly hub: Hub;
  readonly reach: ReachCache;
  readonly deliverer: Deliverer;
  /** tasks handed to working sockets and streams */
  readonly dispatch: TaskDispatch;
  /** an upgrade or stream from a browser page of another origin is refused (DNS rebinding) */
  readonly origins: Origins;
  /** open sockets and streams per client address */
  readonly held: HeldConnections;
  /** proxies whose X-Forwarded-For names the client (TRUSTED_PROXIES) */
  private trusted: ReadonlySet<string>;

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
    this.hub.beforeOffer((e) => {
      const ids = reachChangedIds(e);
      return ids && this.reach.refresh(ids);
    });
    this.deliverer = new Deliverer(signals);
    this.dispatch = new TaskDispatch(signals, inbox, this.hub, log);
    this.origins = new Origins(links, config.allowedOrigins);
    this.held = new HeldConnections(config.maxConnectionsPerAddress);
    this.trusted = new Set(config.trustedProxies.map((ip) => canonicalIp(ip) ?? ip));
  }

  /** The client address of an upgrade or stream request, as the public routes' budget reads it. */
  addressOf(res: HttpResponse, forwardedFor: string): string {
    return clientAddress(Buffer.from(res.getRemoteAddressAsText()).toString(), forwardedFor || undefined, this.trusted);
  }

  get docsBase(): string {
    return this.links.docsBase;
  }

  async start(app: TemplatedApp, fail: (x: Exchange, rid: string, e: unknown) => void): Promise<void> {
    await this.hub.start();
    this.dispatch.start();
    mountWebSocket(app, this);
    mountSse(app, this, fail);
  }

  /** One signal's committed changes as they happen (A2A task streams), while the holder's key authenticates; call the answer to stop. */
  watchSignal(signalId: string, onChange: (s: Signal) => void, holder: { principal: Principal; key: string; ended: () => void }): () => void {
    const credential = new Credential(this.store, holder.key, new Audience(holder.principal, this.reach, false), this.hub.cursor, () => undefined, () => {
      stop();
      holder.ended();
    });
    const stop = this.watch(
      (e) => isSignalEntry(e) && e.signal.id === signalId,
      (e) => isSignalEntry(e) && onChange(e.signal),
      credential,
    );
    return () => {
      credential.close();
      stop();
    };
  }

  /**
   * Every committed journal entry from now on, for one key (MCP resource subscriptions), told lazily whether
   * this key's own push would show it (admins see all) and whether it lands in its inbox. The key's rights are
   * kept current as a socket's are (`Credential`); once it no longer authenticates, the watch ends with `onEnded`.
   */
  watchJournal(p: Principal, key: string, onEntry: (e: JournalEntry, seen: { shown: boolean; recipient: boolean }) => void, onEnded: (e: AppError) => void): () => void {
    const audience = new Audience(p, this.reach, true);
    const credential = new Credential(this.store, key, audience, this.hub.cursor, () => undefined, (e) => {
      stop();
      onEnded(e);
    });
    const stop = this.watch(
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
      credential,
    );
    return () => {
      credential.close();
      stop();
    };
  }

  /** An in-process hub subscriber that never falls behind (it only calls back) but waits for its credential's re-checks; call the answer to stop. */
  private watch(wants: (e: JournalEntry) => boolean, onEntry: (e: JournalEntry) => void, credential?: Credential): () => void {
    let open = true;
    const sub: Subscriber = {
      lastSeq: 0,
      get open() {
        return open;
      },
      wants: (e, seq) => credential?.pending(e, seq) === true || wants(e),
      deliver: (e, seq) => {
        if (credential?.pending(e, seq)) return 'full';
        onEntry(e);
        return 'sent';
      },
      room: async () => {
        await credential?.settled();
        return open;
      },
      fail: () => (open = false),
    };
    void this.hub.attach(sub);
    return () => {
      open = false;
      this.hub.detach(sub);
    };
  }

  stop(): Promise<void> {
    this.dispatch.stop();
    return this.hub.stop();
  }
}
