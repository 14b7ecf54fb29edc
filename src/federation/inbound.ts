/**
 * The receiving side of every federation call (docs/federation.md): the proof gate the front end runs for
 * proof routes, and the four peer calls. Deliver stores a copy routed like a local emit; claim and ack act on
 * our outbound signal for the calling peer's agent; cancel marks either our outbound signal or our inbound copy.
 */
import type { SignalContext } from '../../actors/signal.js';
import { AppError } from '../errors.js';
import { now } from '../clock.js';
import { peerView, type Peer } from '../org/peers.js';
import type { ActorRecord, Runtime } from '../runtime/runtime.js';
import { SIGNAL, signalView, type Signal } from '../signals/kind.js';
import { boundTaskType } from '../signals/schemas.js';
import type { EmitBody, Signals } from '../signals/service.js';
import type { Nonces } from './nonces.js';
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
  async deliver(peer: Peer, signal: DeliveredSignal, hops: number): Promise<Signal> {
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
    return this.signals.receive(peer.id, peerAgent(peer.id, signal.from_identity ?? 'unknown'), body, signal.id, hops + 1);
  }

  /** POST /federation/claim at the origin: the peer's agent takes the lease on our outbound signal. */
  async claim(peer: Peer, signalId: string, agent: string, leaseMs?: number, claimToken?: number): Promise<Signal> {
    await this.outbound(peer, signalId);
    const done = await this.rt.send<SignalContext>(SIGNAL, signalId, { type: 'CLAIM', identity: peerAgent(peer.id, agent), lease_ms: leaseMs ?? this.leaseMs, claim_token: claimToken });
    return signalView(done!.record);
  }

  /** POST /federation/ack at the origin: the claiming agent completes (or fails) our outbound signal. */
  async ack(peer: Peer, signalId: string, agent: string, outcome?: 'completed' | 'failed', claimToken?: number): Promise<Signal> {
    await this.outbound(peer, signalId);
    const done = await this.rt.send<SignalContext>(SIGNAL, signalId, { type: 'ACK', identity: peerAgent(peer.id, agent), outcome, claim_token: claimToken }, { notFound: 'SIGNAL_ACK_NOT_FOUND' });
    return signalView(done!.record);
  }

  /**
   * POST /federation/cancel, both ways: the origin withdrawing marks our inbound copy of `signalId`; the
   * receiver declining marks our outbound signal `signalId`. Refused once completed.
   */
  async cancel(peer: Peer, signalId: string): Promise<Signal> {
    const copy = await this.signals.inboundCopy(peer.id, signalId);
    const target = copy ?? (await this.outbound(peer, signalId));
    const done = await this.rt.send<SignalContext>(SIGNAL, target.context.id, { type: 'CANCEL' });
    return signalView(done!.record);
  }

  /** Our signal `signalId`, which must have been sent to this peer: else POLICY_CROSS_ORG_DENIED. */
  private async outbound(peer: Peer, signalId: string): Promise<ActorRecord<SignalContext>> {
    const rec = (await this.rt.load<SignalContext>(SIGNAL, signalId))?.value;
    if (!rec) throw new AppError('SIGNAL_NOT_FOUND');
    const f = rec.context.federation;
    if (!f || f.direction !== 'outbound' || f.peer_id !== peer.id) throw new AppError('POLICY_CROSS_ORG_DENIED', 'That signal was not federated to this peer');
    return rec;
  }
}
