/**
 * The receiving side of every federation call (docs/federation.md): the proof gate the front end runs for
 * proof routes, and the peer calls. Deliver stores a copy routed like a local emit, counted against the
 * peer's storage quota (src/federation/limits.ts); claim and ack act on
 * our outbound signal for the calling peer's agent; cancel marks either our outbound signal or our inbound copy.
 */
import type { FederationConflict, SignalContext } from '../../actors/signal.js';
import { AppError, isAppError } from '../errors.js';
import { now } from '../clock.js';
import { peerView, type Peer } from '../org/peers.js';
import type { ActorRecord, Runtime } from '../runtime/runtime.js';
import type { Versioned } from '../store/port.js';
import { SIGNAL, signalView, type Signal } from '../signals/kind.js';
import { boundTaskType } from '../signals/schemas.js';
import type { EmitBody, Signals, TaskResult } from '../signals/service.js';
import { usageKey, type PeerLimiter } from './limits.js';
import type { Nonces } from './nonces.js';
import { ackVerdict, cancelVerdict, type Verdict } from './settle.js';
import { parseProof, PEER_HEADER, PROOF_HEADER, verifyProof } from './proof.js';
import type { Trust } from './trust.js';

/** A signed request as the front end received it. */
export interface SignedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

/** How a peer's agent is named here: in claimed_by, and as the sender of an inbound copy. */
export const peerAgent = (peerId: string, agent: string) => `peer:${peerId}:${agent}`;

/** Peer ids as trust routes accept them (src/federation/schemas.ts). */
const PEER_ID = /^[0-9A-Za-z_-]{1,64}$/;

/** A federated signal crosses at most this many hops. */
export const MAX_HOPS = 1;

export interface DeliveredSignal {
  id: string;
  signal_type: string;
  content: string;
  from_identity?: string | null;
  from_role?: string | null;
  to_role?: string | null;
  to_ring?: string | null;
  to_identity?: string | null;
  parent_id?: string | null;
  urgency?: number;
  tags?: string[];
  metadata?: Record<string, unknown>;
  payload?: Record<string, unknown>;
  source_org?: string | null;
}

const orUndefined = <T>(v: T | null | undefined): T | undefined => v ?? undefined;

export class Inbound {
  constructor(
    private rt: Runtime,
    private trust: Trust,
    private nonces: Nonces,
    private signals: Signals,
    private leaseMs: number,
    private limiter: PeerLimiter,
  ) {}

  /**
   * Proof auth, in order: FED_PEER_MISSING, FED_PROOF_MISSING, FED_PROOF_INVALID, FED_PEER_DENIED,
   * FED_TRUST_NOT_ESTABLISHED, FED_TRUST_EXPIRED, the proof itself (skew, body digest, signature), then the
   * nonce's single use (FED_REPLAY_DETECTED). A nonce is spent only by a proof that verified.
   */
  async verify(req: SignedRequest): Promise<Peer> {
    const peerId = req.headers[PEER_HEADER];
    if (!peerId) throw new AppError('FED_PEER_MISSING');
    const proof = parseProof(req.headers[PROOF_HEADER]);
    const at = now();
    // an id no peer can have is not looked up (store keys are bounded)
    if (!PEER_ID.test(peerId)) throw new AppError('FED_PEER_DENIED');
    const rec = await this.trust.verifying(peerId, at);
    verifyProof(proof, rec.context.shared_secret, req.method, req.path, req.body, at);
    await this.nonces.use(peerId, proof.nonce, proof.ts, at);
    return peerView(rec);
  }

  /** POST /federation/deliver: a copy of the peer's signal, routed here; a redelivery answers the stored copy. */
  async deliver(peer: Peer, signal: DeliveredSignal, hops: number, requestId?: string): Promise<Signal> {
    if (!peer.allowed_scopes.includes(signal.signal_type)) throw new AppError('FED_SCOPE_DENIED', `signal_type ${signal.signal_type} is not in the peer's allowed_scopes`, { field: 'signal_type' });
    if (hops >= MAX_HOPS || signal.source_org) throw new AppError('FED_HOP_LIMIT', undefined, { hops });
    boundTaskType(signal.payload, 'signal.payload.task_type');
    const body: EmitBody = {
      signal_type: signal.signal_type,
      content: signal.content,
      from_role: orUndefined(signal.from_role),
      to_role: orUndefined(signal.to_role),
      to_ring: orUndefined(signal.to_ring),
      to_identity: orUndefined(signal.to_identity),
      parent_id: orUndefined(signal.parent_id),
      urgency: signal.urgency,
      tags: signal.tags,
      metadata: signal.metadata,
      payload: signal.payload,
    };
    // one copy of a peer at a time in this process: its usage record is written by every copy
    const charge = (rec: ActorRecord<SignalContext>) => this.limiter.charge(peer, Buffer.byteLength(JSON.stringify(rec)));
    return this.rt.serial(usageKey(peer.id), () => this.signals.receive(peer.id, peerAgent(peer.id, signal.from_identity ?? 'unknown'), body, signal.id, hops + 1, charge, requestId));
  }

  /** POST /federation/claim at the origin: the peer's agent takes the lease on our outbound signal. */
  async claim(peer: Peer, signalId: string, agent: string, leaseMs?: number, claimToken?: number, requestId?: string): Promise<Signal> {
    await this.outbound(peer, signalId);
    const done = await this.rt.send<SignalContext>(SIGNAL, signalId, { type: 'CLAIM', identity: peerAgent(peer.id, agent), lease_ms: leaseMs ?? this.leaseMs, claim_token: claimToken }, { requestId });
    return signalView(done!.record);
  }

  /**
   * POST /federation/ack at the origin: the claiming agent completes (or fails) our outbound signal. A repeat
   * answers the current state; a completion after the lease lapsed is accepted while nobody holds the task;
   * a completion the task can no longer take is FED_STATE_CONFLICT (docs/federation.md, Repeats and conflicts).
   */
  async ack(peer: Peer, signalId: string, agent: string, outcome?: 'completed' | 'failed', claimToken?: number, done: TaskResult = {}, requestId?: string): Promise<Signal> {
    const who = peerAgent(peer.id, agent);
    const reported = outcome === 'failed' ? {} : { ...(done.result !== undefined && { result: done.result }), ...(done.resources !== undefined && { resources: done.resources }) };
    const event = { type: 'ACK', identity: who, outcome, claim_token: claimToken, late: true, ...reported };
    const asked = outcome ?? 'completed';
    return this.settle(() => this.outbound(peer, signalId), (r) => ackVerdict(r, who, asked, now()), event, { call: 'ack', outcome: asked }, requestId);
  }

  /** POST /federation/heartbeat at the origin: the peer's holder extends our lease and reports its progress and note. */
  async heartbeat(peer: Peer, signalId: string, agent: string, beat: { lease_ms: number; progress?: number; note?: string }, requestId?: string): Promise<Signal> {
    const stored = await this.outbound(peer, signalId);
    const event = { type: 'HEARTBEAT', identity: peerAgent(peer.id, agent), lease_ms: beat.lease_ms, progress: beat.progress, note: beat.note };
    const done = await this.rt.send<SignalContext>(SIGNAL, signalId, event, { loaded: stored, requestId });
    return signalView(done!.record);
  }

  /**
   * POST /federation/cancel, both ways: the origin withdrawing marks our inbound copy of `signalId`; the
   * receiver declining marks our outbound signal `signalId`. A repeat answers the current state; a completed
   * task is FED_STATE_CONFLICT.
   */
  async cancel(peer: Peer, signalId: string, requestId?: string): Promise<Signal> {
    const target = async () => {
      const copy = await this.signals.inboundCopy(peer.id, signalId);
      return copy ? ((await this.rt.load<SignalContext>(SIGNAL, copy.context.id)) ?? this.gone()) : this.outbound(peer, signalId);
    };
    return this.settle(target, cancelVerdict, { type: 'CANCEL' }, { call: 'cancel', outcome: 'cancelled' }, requestId);
  }

  /**
   * Applies a peer's call unless the task's state already answers it. A refusal after `apply` means the task
   * moved between the read and the write: it is judged once more on the state it moved to.
   */
  private async settle(
    load: () => Promise<Versioned<ActorRecord<SignalContext>>>,
    verdict: (r: ActorRecord<SignalContext>) => Verdict,
    event: Record<string, unknown> & { type: string },
    call: Pick<FederationConflict, 'call' | 'outcome'>,
    requestId: string | undefined,
  ): Promise<Signal> {
    for (let round = 0; ; round++) {
      const stored = await load();
      const v = verdict(stored.value);
      if (v === 'repeat') return signalView(stored.value);
      if (v === 'conflict') throw await this.conflict(stored.value, call, requestId);
      try {
        const done = await this.rt.send<SignalContext>(SIGNAL, stored.value.context.id, event, { loaded: stored, requestId });
        return signalView(done!.record);
      } catch (e) {
        if (round > 0 || !isAppError(e) || e.status >= 500) throw e;
      }
    }
  }

  /** Records the refused call on our copy (the other side records it too) and answers the refusal. */
  private async conflict(r: ActorRecord<SignalContext>, call: Pick<FederationConflict, 'call' | 'outcome'>, requestId: string | undefined): Promise<AppError> {
    const seen = { task_status: r.context.task_status, delivery_state: r.value };
    const mark = { ...call, refused_by: 'here' as const, ...seen };
    const was = r.context.federation?.conflict;
    // a retried call meets the mark its first try left: nothing new to record
    const same = was && (Object.keys(mark) as (keyof typeof mark)[]).every((k) => was[k] === mark[k]);
    if (!same) await this.rt.send<SignalContext>(SIGNAL, r.context.id, { type: 'FED_CONFLICT', conflict: mark }, { quiet: true, requestId });
    return new AppError('FED_STATE_CONFLICT', `The task is ${r.context.task_status ?? r.value} here; the ${call.call} was not applied`, { ...call, ...seen });
  }

  private gone(): never {
    throw new AppError('SIGNAL_NOT_FOUND');
  }

  /** Our signal `signalId`, which must have been sent to this peer: else POLICY_CROSS_ORG_DENIED. */
  private async outbound(peer: Peer, signalId: string): Promise<Versioned<ActorRecord<SignalContext>>> {
    const stored = await this.rt.load<SignalContext>(SIGNAL, signalId);
    if (!stored) throw new AppError('SIGNAL_NOT_FOUND');
    const f = stored.value.context.federation;
    if (!f || f.direction !== 'outbound' || f.peer_id !== peer.id) throw new AppError('POLICY_CROSS_ORG_DENIED', 'That signal was not federated to this peer');
    return stored;
  }
}
