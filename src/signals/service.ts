/** Signal rules: who may emit, claim and ack what; which actor gets which event. */
import type { SignalContext } from '../../actors/signal.js';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import { iso, now } from '../clock.js';
import { newId } from '../ids.js';
import type { Principal } from '../identity/model.js';
import type { ActorRecord, Runtime } from '../runtime/runtime.js';
import { SIGNAL, signalIndexes, signalView, type Signal } from './kind.js';
import { page, type Page } from '../api/paging.js';

export const CANONICAL_TYPES = ['pulse', 'sense', 'task', 'query', 'alert', 'artifact', 'proposal', 'shift'];

export interface EmitBody {
  signal_type: string;
  content: string;
  from_role?: string;
  from_identity?: string;
  to_role?: string;
  to_ring?: string;
  to_identity?: string;
  parent_id?: string;
  urgency?: number;
  tags?: string[];
  target_capabilities?: string[];
  routing_policy?: string;
  metadata?: Record<string, unknown>;
  payload?: Record<string, unknown>;
  resources?: unknown[];
  attachments?: unknown[];
}

export class Signals {
  constructor(
    private rt: Runtime,
    private config: Pick<Config, 'taskLeaseMs' | 'maxDeliveryAttempts' | 'strictSignalTypes'>,
  ) {}

  requireMember(p: Principal): void {
    if (!p.membership || p.membership.status !== 'active') throw new AppError('POLICY_MEMBERSHIP_REQUIRED');
  }

  async emit(p: Principal, body: EmitBody): Promise<Signal> {
    this.requireMember(p);
    if (body.from_identity !== undefined && body.from_identity !== p.identity.id) throw new AppError('POLICY_IDENTITY_MISMATCH');
    const canonical = CANONICAL_TYPES.includes(body.signal_type);
    if (!canonical && this.config.strictSignalTypes) throw new AppError('SIGNAL_EMIT_INVALID_TYPE', `signal_type must be one of ${CANONICAL_TYPES.join(', ')}`, { field: 'signal_type' });
    const t = iso();
    const id = newId();
    const context: SignalContext = {
      id,
      signal_type: body.signal_type,
      base_type: canonical ? body.signal_type : 'custom',
      content: body.content,
      urgency: body.urgency ?? 0.5,
      from_role: body.from_role ?? null,
      from_identity: p.identity.id,
      to_role: body.to_role ?? null,
      to_identity: body.to_identity ?? null,
      to_ring: body.to_ring ?? null,
      parent_id: body.parent_id ?? null,
      sequence: 0,
      tags: body.tags ?? [],
      target_capabilities: body.target_capabilities ?? [],
      routing_policy: body.routing_policy ?? null,
      metadata: canonical ? (body.metadata ?? {}) : { ...body.metadata, noncanonical_type: true },
      payload: body.payload ?? {},
      resources: [...(body.resources ?? []), ...(body.attachments ?? [])],
      task_status: body.signal_type === 'task' ? 'open' : null,
      claimed_by: null,
      claimed_at: null,
      claim_expires_at: null,
      protocol_version: 'svc/1.0',
      delivery_count: 0,
      max_attempts: this.config.maxDeliveryAttempts,
      created_at: t,
      updated_at: t,
    };
    const record: ActorRecord<SignalContext> = { value: 'pending', context };
    const res = await this.rt.store.commit(this.rt.createOps(SIGNAL, id, record));
    if (!res.ok) throw new AppError('INTERNAL_SERVER_ERROR', 'signal id collision');
    return signalView(record);
  }

  async get(id: string): Promise<Signal> {
    const r = await this.rt.load<SignalContext>(SIGNAL, id);
    if (!r) throw new AppError('SIGNAL_NOT_FOUND');
    return signalView(r.value);
  }

  async claim(p: Principal, signalId: string, leaseMs?: number): Promise<Signal> {
    this.requireMember(p);
    const c = await this.rt.send<SignalContext>(SIGNAL, signalId, { type: 'CLAIM', identity: p.identity.id, lease_ms: leaseMs ?? this.config.taskLeaseMs });
    return signalView(c!.record);
  }

  async ack(p: Principal, signalId: string, outcome?: 'completed' | 'failed'): Promise<Signal> {
    this.requireMember(p);
    const c = await this.rt.send<SignalContext>(SIGNAL, signalId, { type: 'ACK', identity: p.identity.id, outcome, now: now() }, { notFound: 'SIGNAL_ACK_NOT_FOUND' });
    return signalView(c!.record);
  }

  async list(after: string | undefined, limit: number): Promise<Page<Signal>> {
    const ids = await this.rt.store.range(signalIndexes.all, { lt: after, reverse: true, limit: limit + 1 });
    const recs = await this.rt.loadMany<SignalContext>(SIGNAL, ids.slice(0, limit));
    return page(
      recs.map((r) => signalView(r!)),
      ids.length > limit,
      (s) => s.id,
    );
  }
}
