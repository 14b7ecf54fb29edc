/** Webhook records (plain, version-checked), their deliveries (actors) and replay. */
import type { DeliveryContext } from '../../actors/webhook-delivery.js';
import { AppError } from '../errors.js';
import { iso } from '../clock.js';
import { newId } from '../ids.js';
import type { ActorRecord, Runtime } from '../runtime/runtime.js';
import type { Principal } from '../identity/model.js';
import { auditOps } from '../audit/audit.js';
import { committedEffect, effectOps, refuseLostClaim } from '../store/idempotency.js';
import { loadAll, scanDesc, type Scanned } from '../store/scan.js';
import { isIP } from 'node:net';
import { isPrivateAddress } from './address.js';
import { OUTBOX_LOGS } from './dispatcher.js';
import { DELIVERY, deliveryView, idOfDeliveryMember, newSecret, webhookIndexes, webhookKeys, webhookView, WEBHOOK_EVENTS, type Delivery, type Webhook, type WebhookEvent } from './model.js';

export interface WebhookBody {
  url?: string;
  events?: string[];
  secret?: string;
  description?: string | null;
  active?: boolean;
}

const SECRET = /^whsec_[A-Za-z0-9+/]{22,}={0,2}$/;
const bad = (field: string, message: string, reason = 'invalid') => new AppError('WEBHOOK_VALIDATION_FAILED', message, { field, reason });

export class Webhooks {
  constructor(
    private rt: Runtime,
    private allowPrivateNetwork: boolean,
  ) {}

  private get store() {
    return this.rt.store;
  }

  private checkUrl(raw: string): string {
    let u: URL;
    try {
      u = new URL(raw);
    } catch {
      throw bad('url', 'url must be an absolute URL', 'format');
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw bad('url', 'url must be http or https', 'format');
    if (u.username || u.password) throw bad('url', 'url may not carry credentials', 'format');
    // host names are checked on every attempt (DNS may change); a literal address can be refused now
    const host = u.hostname.replace(/^\[|\]$/g, '');
    if (!this.allowPrivateNetwork && (isIP(host) ? isPrivateAddress(host) : host === 'localhost')) throw bad('url', `${host} is a private, loopback or link-local address`, 'private_address');
    return u.href;
  }

  private checkEvents(events: string[]): WebhookEvent[] {
    if (!events.length) throw bad('events', 'events must name at least one event');
    const unknown = events.find((e) => !(WEBHOOK_EVENTS as readonly string[]).includes(e));
    if (unknown) throw bad('events', `unknown event ${unknown}; events: ${WEBHOOK_EVENTS.join(', ')}`);
    return [...new Set(events)] as WebhookEvent[];
  }

  private checkSecret(s: string): string {
    if (!SECRET.test(s) || Buffer.from(s.slice(6), 'base64').length < 16) throw bad('secret', 'secret must be whsec_ followed by at least 16 bytes in base64', 'format');
    return s;
  }

  /** The answer carries the secret: the only time it is shown. */
  async create(by: Principal, body: Required<Pick<WebhookBody, 'url' | 'events'>> & WebhookBody): Promise<ReturnType<typeof webhookView> & { secret: string }> {
    const done = committedEffect<ReturnType<typeof webhookView> & { secret: string }>(by);
    if (done) return done;
    const t = iso();
    const since = Object.fromEntries(await Promise.all(OUTBOX_LOGS.map(async (l) => [l, await this.store.lastSeq(l)] as const)));
    const w: Webhook = {
      id: newId(),
      url: this.checkUrl(body.url),
      events: this.checkEvents(body.events),
      description: body.description ?? null,
      active: body.active ?? true,
      secret: body.secret !== undefined ? this.checkSecret(body.secret) : newSecret(),
      since,
      created_by: by.identity.id,
      created_at: t,
      updated_at: t,
    };
    const answer = { ...webhookView(w), secret: w.secret };
    const res = await this.store.commit([
      { op: 'put', key: webhookKeys.webhook(w.id), value: w, expect: 0 },
      { op: 'index', index: webhookIndexes.all, member: w.id },
      ...effectOps(by, answer),
    ]);
    refuseLostClaim(res);
    if (!res.ok) throw new AppError('INTERNAL_SERVER_ERROR', 'webhook id collision');
    return answer;
  }

  async list() {
    return (await loadAll<Webhook>(this.store, webhookIndexes.all, webhookKeys.webhook)).reverse().map(webhookView);
  }

  private async load(id: string) {
    const r = await this.store.get<Webhook>(webhookKeys.webhook(id));
    if (!r) throw new AppError('WEBHOOK_NOT_FOUND');
    return r;
  }

  async get(id: string) {
    return webhookView((await this.load(id)).value);
  }

  /** A new secret given here replaces the old one for every later attempt; it is not shown back. */
  async update(id: string, body: WebhookBody) {
    return this.rt.retry(async () => {
      const cur = await this.load(id);
      const w: Webhook = {
        ...cur.value,
        url: body.url !== undefined ? this.checkUrl(body.url) : cur.value.url,
        events: body.events !== undefined ? this.checkEvents(body.events) : cur.value.events,
        description: body.description !== undefined ? body.description : cur.value.description,
        active: body.active ?? cur.value.active,
        secret: body.secret !== undefined ? this.checkSecret(body.secret) : cur.value.secret,
        updated_at: iso(),
      };
      return { ops: [{ op: 'put', key: webhookKeys.webhook(id), value: w, expect: cur.version }], result: webhookView(w) };
    });
  }

  /** Its deliveries stay listed; those still retrying give up on their next attempt. */
  async remove(id: string) {
    return this.rt.retry(async () => {
      const cur = await this.load(id);
      return {
        ops: [
          { op: 'del', key: webhookKeys.webhook(id), expect: cur.version },
          { op: 'index', index: webhookIndexes.all, member: id, remove: true },
        ],
        result: webhookView(cur.value),
      };
    });
  }

  async deliveries(id: string, before: string | undefined, limit: number): Promise<Scanned<Delivery>> {
    await this.load(id);
    return scanDesc<Delivery>(this.store, [webhookIndexes.deliveries(id)], {
      before,
      limit,
      load: async (members) => (await this.rt.loadMany<DeliveryContext>(DELIVERY, members.map(idOfDeliveryMember))).map((r) => (r ? deliveryView(r) : undefined)),
      keep: () => true,
    });
  }

  async replay(by: Principal, deliveryId: string): Promise<Delivery> {
    const replayed = committedEffect<Delivery>(by);
    if (replayed) return replayed;
    const audit = (rec: ActorRecord<DeliveryContext>) => auditOps({ actor: by.identity.id, action: 'webhook.replay', target: deliveryId, requestId: by.requestId, details: { webhook_id: rec.context.webhook_id, event: rec.context.event } });
    const done = await this.rt.send<DeliveryContext>(DELIVERY, deliveryId, { type: 'REPLAY' }, { requestId: by.requestId, extra: (rec) => [...effectOps(by, deliveryView(rec)), ...audit(rec)] });
    return deliveryView(done!.record);
  }
}
