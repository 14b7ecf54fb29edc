/**
 * The sending side of federation (docs/federation.md): checks a peer may be sent to, records calls to a peer
 * as federation delivery actors in the commit of the change that causes them (outbox), runs their POSTs off
 * the request path with a fresh proof per attempt, and makes the one synchronous call, a claim forwarded to
 * the task's origin (the origin decides who holds a federated task).
 */
import { federationDeliveryMachine, federationDeliveryTimers, newFederationDelivery, type FederationCall, type FederationDeliveryContext } from '../../actors/federation-delivery.js';
import type { PeerContext } from '../../actors/peer.js';
import type { FederationConflict, SignalContext } from '../../actors/signal.js';
import { now } from '../clock.js';
import type { Config } from '../config.js';
import { AppError, catalogue, isAppError, type ErrorCode } from '../errors.js';
import { newId } from '../ids.js';
import type { Logger } from '../log.js';
import { PEER } from '../org/peers.js';
import { actorKey, type ActorKind, type ActorRecord, type Runtime } from '../runtime/runtime.js';
import type { Op } from '../store/port.js';
import { scanDesc, type Scanned } from '../store/scan.js';
import { Outbound, startAttempt, type Answer } from '../webhooks/outbound.js';
import { proofHeaders } from './proof.js';
import { usableTrust } from './trust.js';

export const FEDERATION_DELIVERY = 'federation-delivery';
const SIGNAL = 'signal';

/** Where a delivery is in its life, for the per-peer counts of GET /admin/peers. */
type Bucket = 'pending' | 'delivered' | 'failed';
const bucketOf = (state: string): Bucket => (state === 'delivered' ? 'delivered' : state === 'failed' ? 'failed' : 'pending');
export const federationIndexes = { deliveries: (peerId: string, bucket: Bucket) => `federation-deliveries:${peerId}:${bucket}` };
const member = (c: FederationDeliveryContext) => `${c.order}|${c.id}`;
const idOfMember = (m: string) => m.slice(m.indexOf('|') + 1);

type Config_ = Pick<Config, 'federationRetryWindowMs' | 'federationBackoffBaseMs' | 'federationTimeoutMs' | 'federationMaxInFlight' | 'allowPrivateNetwork'>;

export interface PeerDeliveryStats {
  delivered: number;
  failed: number;
  pending: number;
  last_error: { at: string; call: FederationCall; signal_id: string; error: string } | null;
}

/** Status codes a later attempt may get past: the peer is away, overloaded, or has not seen the signal yet. */
const retryable = (status: number) => status === 404 || status === 408 || status === 429 || status >= 500;

/** The error code and details of a peer's error envelope, when the code is one of ours. */
function peerError(a: Answer): { code: ErrorCode; details: Record<string, unknown> } | undefined {
  try {
    const e = (JSON.parse(a.body) as { error?: { code?: string; details?: unknown } }).error;
    const details = e?.details && typeof e.details === 'object' ? (e.details as Record<string, unknown>) : {};
    if (e?.code && Object.hasOwn(catalogue, e.code)) return { code: e.code as ErrorCode, details };
  } catch {
    // not JSON: described by its status alone
  }
  return undefined;
}

/** The origin's answers that say where its task stands: passed on under a code of ours, with `details.peer_code`. */
const TASK_HELD = new Set<string>(['SIGNAL_CLAIM_CONFLICT']);
const TASK_MOVED_ON = new Set<string>(['SIGNAL_CLAIM_INVALID_STATUS', 'SIGNAL_CLAIM_NOT_TASK', 'SIGNAL_DEAD_LETTER', 'FED_STATE_CONFLICT']);

/**
 * A peer's refusal of a forwarded call as our agent sees it. The peer's code is never answered as ours (a
 * hostile or broken origin must not speak for this service's auth or policy): a task held by another is 409
 * SIGNAL_CLAIM_CONFLICT, a task that moved on 409 FED_STATE_CONFLICT, anything else 502 FED_DELIVERY_FAILED;
 * each with `details.peer_code` (a catalogue code, or absent) and `peer_status`.
 */
export function peerRefusal(peerId: string, a: Answer): AppError {
  const code = peerError(a)?.code;
  const details = { peer_id: peerId, peer_status: a.status, ...(code && { peer_code: code }) };
  if (a.status === 409 && code && TASK_HELD.has(code)) return new AppError('SIGNAL_CLAIM_CONFLICT', 'The task is held by another agent at its origin', details);
  if ((a.status === 409 || a.status === 422) && code && TASK_MOVED_ON.has(code)) return new AppError('FED_STATE_CONFLICT', "The origin's copy of this task is no longer open", details);
  return new AppError('FED_DELIVERY_FAILED', `The origin refused the call (HTTP ${a.status})`, details);
}

/** A short string from a peer's answer, or null (a peer's details are not trusted to be anything). */
const shortString = (v: unknown) => (typeof v === 'string' && v.length <= 64 ? v : null);

export class FederationOut {
  private out: Outbound;

  constructor(
    private rt: Runtime,
    private config: Config_,
    log: Logger,
  ) {
    this.out = new Outbound({ timeoutMs: config.federationTimeoutMs, maxInFlight: config.federationMaxInFlight, allowPrivateNetwork: config.allowPrivateNetwork }, (id) => this.attempt(id), log, 'federation');
  }

  /** The delivery actor kind: indexed per peer by outcome; a `queued` delivery waits in the outbound queue, its send starts once `sending` is durable. */
  kind(): ActorKind<FederationDeliveryContext> {
    return {
      name: FEDERATION_DELIVERY,
      machine: federationDeliveryMachine,
      notFound: 'NOT_FOUND',
      invalid: 'FED_DELIVERY_FAILED',
      indexes: (r) => [[federationIndexes.deliveries(r.context.peer_id, bucketOf(r.value)), member(r.context)]],
      timers: (r) => federationDeliveryTimers(r.value, r.context),
      committed: (id, rec) => {
        if (rec.value === 'queued') this.out.enqueue(id);
      },
      // the signal's FED_DELIVERY_FAILED mark is written in the commit that fails the delivery: no crash can split them
      alongside: async (_id, rec, prev, rt, requestId) => {
        if (rec.value !== 'failed' || prev?.value === 'failed') return [];
        const signal = await rt.store.get<ActorRecord<SignalContext>>(actorKey(SIGNAL, rec.context.signal_id));
        try {
          return (signal && rt.moveOps<SignalContext>(SIGNAL, rec.context.signal_id, signal, { type: 'FED_FAILED', error: 'FED_DELIVERY_FAILED' }, requestId)?.ops) ?? [];
        } catch {
          return []; // a signal that refuses the mark (none expected) must not keep its delivery from ending
        }
      },
    };
  }

  /** The peer and secret of a usable trust (active, established, unexpired), refused as a receiver would. */
  private async trustOf(peerId: string): Promise<{ peer: PeerContext; secret: string }> {
    const r = usableTrust((await this.rt.load<PeerContext>(PEER, peerId))?.value, now());
    return { peer: r.context, secret: r.context.shared_secret };
  }

  /** The peer a signal of this type may be emitted to: a usable trust whose allowed_scopes hold the type. */
  async outboundPeer(peerId: string, signalType: string): Promise<PeerContext> {
    let peer: PeerContext;
    try {
      ({ peer } = await this.trustOf(peerId));
    } catch (e) {
      throw isAppError(e) ? new AppError(e.code, e.message, { ...e.details, field: 'to_peer' }) : e;
    }
    if (!peer.allowed_scopes.includes(signalType)) throw new AppError('FED_SCOPE_DENIED', `${signalType} is not in the peer's allowed_scopes`, { field: 'signal_type' });
    return peer;
  }

  /** Ops creating the delivery of one call to a peer, committed with the change that causes it. */
  deliveryOps(peerId: string, call: FederationCall, signalId: string, body: Record<string, unknown>): Op[] {
    const id = newId();
    const rec = newFederationDelivery({
      id,
      peer_id: peerId,
      call,
      signal_id: signalId,
      body,
      order: id,
      now: now(),
      retry_window_ms: this.config.federationRetryWindowMs,
      backoff_base_ms: this.config.federationBackoffBaseMs,
      // an attempt ends by its own timeout; twice that without a result means the sender died mid-send,
      // and as long queued without a start, that its process may be gone (queued again, nothing recorded)
      send_hold_ms: 2 * this.config.federationTimeoutMs + 1000,
    });
    return this.rt.createOps(FEDERATION_DELIVERY, id, rec);
  }

  /** The body of `/federation/deliver`: the origin's signal, not yet across any hop. */
  static deliverBody(c: SignalContext): Record<string, unknown> {
    const { id, signal_type, content, from_identity, from_role, to_role, to_ring, to_identity, urgency, tags, metadata, payload, parent_id } = c;
    return { signal: { id, signal_type, content, from_identity, from_role, to_role, to_ring, to_identity, urgency, tags, metadata, payload, parent_id }, hops: 0 };
  }

  /**
   * Forwards a local agent's claim (or renewal) of an inbound federated task to its origin with the lease the
   * local copy takes, and waits for the answer: the origin's refusal is wrapped (`peerRefusal`), an
   * unreachable origin is FED_DELIVERY_FAILED.
   */
  async forwardClaim(c: SignalContext, agent: string, leaseMs: number): Promise<void> {
    await this.forward(c, 'claim', { agent, lease_ms: leaseMs });
  }

  /**
   * Forwards a local holder's heartbeat of an inbound federated task to its origin, as a renewal is: the
   * origin's lease is extended with ours, and its task and emitter see the progress and note.
   */
  async forwardHeartbeat(c: SignalContext, agent: string, beat: { lease_ms: number; progress?: number; note?: string }): Promise<void> {
    await this.forward(c, 'heartbeat', { agent, ...beat });
  }

  private async forward(c: SignalContext, call: 'claim' | 'heartbeat', body: Record<string, unknown>): Promise<void> {
    const f = c.federation!;
    const { peer, secret } = await this.trustOf(f.peer_id);
    let a: Answer;
    try {
      a = await this.call(peer, secret, call, { signal_id: f.remote_id, ...body });
    } catch (e) {
      throw new AppError('FED_DELIVERY_FAILED', `The origin could not be reached: ${(e as Error).message}`, { peer_id: f.peer_id });
    }
    if (a.status >= 200 && a.status < 300) return;
    throw peerRefusal(f.peer_id, a);
  }

  private call(peer: PeerContext, secret: string, call: FederationCall | 'claim' | 'heartbeat', payload: Record<string, unknown>): Promise<Answer> {
    const url = new URL(`${peer.endpoint}/federation/${call}`);
    const body = JSON.stringify(payload);
    const headers = {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'user-agent': 'svc-federation/1',
      ...proofHeaders(peer.id, secret, 'POST', url.pathname, body, now()),
    };
    return this.out.post(url, headers, body);
  }

  private async attempt(id: string): Promise<void> {
    const c = await startAttempt<FederationDeliveryContext>(this.rt, FEDERATION_DELIVERY, id);
    if (!c) return;
    const outcome = await this.post(c);
    if (this.out.isStopped) return;
    const { remote_id, conflict, ...result } = outcome;
    // the attempt number fences the result: a late one (its attempt timed out, another began) records nothing, the signal's mark included
    const mark = remote_id ? { type: 'FED_DELIVERED', remote_id } : conflict ? { type: 'FED_CONFLICT', conflict } : undefined;
    const marked = mark ? (rec: ActorRecord<FederationDeliveryContext>) => (rec.value === 'delivered' ? this.markOps(c.signal_id, mark) : []) : undefined;
    this.out.recorded(await this.rt.send(FEDERATION_DELIVERY, id, { type: 'RESULT', attempt: c.attempt_count, ...result }, { quiet: true, extra: marked }), id, c.attempt_count);
  }

  /** The signal's FED_DELIVERED mark (the peer's copy id) or FED_CONFLICT mark, written in the commit that records the delivery. */
  private async markOps(signalId: string, mark: Record<string, unknown> & { type: string }): Promise<Op[]> {
    const signal = await this.rt.store.get<ActorRecord<SignalContext>>(actorKey(SIGNAL, signalId));
    try {
      return (signal && this.rt.moveOps<SignalContext>(SIGNAL, signalId, signal, mark)?.ops) ?? [];
    } catch {
      return [];
    }
  }

  private async post(c: FederationDeliveryContext) {
    const started = performance.now();
    const latency = () => Math.round(performance.now() - started);
    try {
      // a suspended peer or a lapsed trust may come back within the retry window: retried like a peer that is away
      const { peer, secret } = await this.trustOf(c.peer_id);
      const a = await this.call(peer, secret, c.call, c.body);
      const err = peerError(a);
      const conflict = a.status === 409 && err?.code === 'FED_STATE_CONFLICT' && c.call !== 'deliver' ? this.conflictOf(c, err.details) : null;
      // a conflict is the peer's answer for good, not our failure: the delivery ends delivered and the signal records the conflict
      const ok = (a.status >= 200 && a.status < 300) || conflict !== null;
      return {
        ok,
        give_up: !ok && !retryable(a.status),
        response_code: a.status,
        latency_ms: latency(),
        error: a.status >= 200 && a.status < 300 ? null : `HTTP ${a.status}${err ? ` ${err.code}` : ''}`,
        remote_id: ok && c.call === 'deliver' ? remoteIdOf(a) : null,
        conflict,
      };
    } catch (e) {
      return { ok: false, response_code: null, latency_ms: latency(), error: isAppError(e) ? e.code : (e as Error).message, remote_id: null, conflict: null };
    }
  }

  /** The conflict the peer answered to our ack or cancel, as our signal records it. */
  private conflictOf(c: FederationDeliveryContext, details: Record<string, unknown>): Omit<FederationConflict, 'at'> {
    const outcome = c.call === 'cancel' ? 'cancelled' : c.body.outcome === 'failed' ? 'failed' : 'completed';
    return { call: c.call as 'ack' | 'cancel', outcome, refused_by: 'peer', task_status: shortString(details.task_status), delivery_state: shortString(details.delivery_state) };
  }

  /** Per-peer counts of deliveries by outcome, and the newest error any attempt met. */
  async peerStats(peerId: string): Promise<PeerDeliveryStats> {
    const [delivered, failed, pending] = await Promise.all((['delivered', 'failed', 'pending'] as const).map((b) => this.rt.store.count(federationIndexes.deliveries(peerId, b))));
    // the newest deliveries of each outcome: any of them may have met an error on some attempt
    const recent = await Promise.all((['failed', 'pending', 'delivered'] as const).map((b) => this.rt.store.range(federationIndexes.deliveries(peerId, b), { reverse: true, limit: 20 })));
    const recs = await this.rt.loadMany<FederationDeliveryContext>(FEDERATION_DELIVERY, recent.flat().map(idOfMember));
    let last: PeerDeliveryStats['last_error'] = null;
    for (const r of recs) {
      const a = r?.context.attempts.filter((x) => x.status === 'failed').at(-1);
      if (r && a?.error && (!last || a.at > last.at)) last = { at: a.at, call: r.context.call, signal_id: r.context.signal_id, error: a.error };
    }
    return { delivered, failed, pending, last_error: last };
  }

  /** A peer's calls, newest first, each with its state and attempts (GET /admin/peers/:id/calls). */
  async calls(peerId: string, before: string | undefined, limit: number): Promise<Scanned<PeerCall>> {
    const indexes = (['pending', 'delivered', 'failed'] as const).map((b) => federationIndexes.deliveries(peerId, b));
    return scanDesc<PeerCall>(this.rt.store, indexes, {
      before,
      limit,
      load: async (members) => (await this.rt.loadMany<FederationDeliveryContext>(FEDERATION_DELIVERY, members.map(idOfMember))).map((r) => (r ? callView(r) : undefined)),
      keep: () => true,
    });
  }

  /** Peers with their delivery counts and last error (GET /admin/peers). */
  async withDeliveries<P extends { id: string }>(peers: P[]): Promise<(P & { deliveries: PeerDeliveryStats })[]> {
    return Promise.all(peers.map(async (p) => ({ ...p, deliveries: await this.peerStats(p.id) })));
  }

  stop(): void {
    this.out.stop();
  }
}

export type PeerCall = ReturnType<typeof callView>;

/** A call as the console shows it: never its signed body. */
function callView(r: ActorRecord<FederationDeliveryContext>) {
  const c = r.context;
  return { id: c.id, call: c.call, signal_id: c.signal_id, status: r.value, attempt_count: c.attempt_count, attempts: c.attempts };
}

function remoteIdOf(a: Answer): string | null {
  try {
    const id = (JSON.parse(a.body) as { data?: { id?: unknown } }).data?.id;
    return typeof id === 'string' ? id : null;
  } catch {
    return null;
  }
}
