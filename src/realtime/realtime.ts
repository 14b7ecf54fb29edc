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
import { ReachCache } from './audience.js';
import { Deliverer } from './deliverer.js';
import { Hub } from './hub.js';
import type { Presence } from '../presence/presence.js';
import { mountSse } from './sse.js';
import { mountWebSocket } from './ws.js';

export class Realtime {
  readonly hub: Hub;
  readonly reach: ReachCache;
  readonly deliverer: Deliverer;

  constructor(
    readonly config: Readonly<Config>,
    readonly store: Store,
    readonly log: Logger,
    org: Org,
    readonly signals: Signals,
    readonly inbox: Inbox,
    readonly presence: Presence,
    private links: Links,
  ) {
    this.hub = new Hub(store, log, config.journalRetainEntries);
    this.reach = new ReachCache(org);
    this.deliverer = new Deliverer(signals);
  }

  get docsBase(): string {
    return this.links.docsBase;
  }

  async start(app: TemplatedApp, fail: (x: Exchange, rid: string, e: unknown) => void): Promise<void> {
    await this.hub.start();
    mountWebSocket(app, this);
    mountSse(app, this, fail);
  }

  stop(): Promise<void> {
    return this.hub.stop();
  }
}
