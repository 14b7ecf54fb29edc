/** The federation routes: trust (admin Bearer), the peer calls and a peer's memory reads (proof auth, docs/federation.md). */
import type { Route } from '../http/server.js';
import type { Principal } from '../identity/model.js';
import { DeliverBody, PeerAckBody, PeerCancelBody, PeerClaimBody, PeerHeartbeatBody, TrustBody } from '../federation/schemas.js';
import { peerPrincipal } from '../memory/acl.js';
import { QueryBody } from '../memory/schemas.js';
import { PageQuery } from './memory.js';
import { decodeCursor, DEFAULT_LIMIT, pageReply } from './paging.js';
import type { Services } from './services.js';

const PROOF_ERRORS = ['FED_PEER_MISSING', 'FED_PROOF_MISSING', 'FED_PROOF_INVALID', 'FED_PEER_DENIED', 'FED_TRUST_NOT_ESTABLISHED', 'FED_TRUST_EXPIRED', 'FED_PROOF_FAILED', 'FED_REPLAY_DETECTED'] as const;
const TASK_ERRORS = ['SIGNAL_NOT_FOUND', 'POLICY_CROSS_ORG_DENIED', 'SIGNAL_CLAIM_NOT_TASK', 'SIGNAL_CLAIM_INVALID_STATUS', 'SIGNAL_CLAIM_CONFLICT', 'SIGNAL_DEAD_LETTER'] as const;

export const federationRoutes = ({ trust, inbound, memories }: Services): Route<Principal>[] => [
  {
    method: 'post',
    path: '/federation/trust',
    auth: 'admin',
    unscoped: true,
    idempotent: true,
    body: TrustBody,
    invalid: 'DISC_VALIDATION_FAILED',
    errors: ['DISC_PEER_DUPLICATE', 'DISC_PEER_INVALID_TRANSITION'],
    handler: async (r) => ({ status: 201, data: 'peer_id' in r.body ? await trust.record(r.principal, r.body) : await trust.create(r.principal, r.body) }),
  },
  { method: 'get', path: '/federation/trust', auth: 'admin', errors: [], handler: async () => ({ data: await trust.list() }) },
  {
    method: 'post',
    path: '/federation/deliver',
    auth: 'proof',
    body: DeliverBody,
    errors: [...PROOF_ERRORS, 'FED_SCOPE_DENIED', 'FED_HOP_LIMIT', 'SIGNAL_NOT_FOUND', 'FED_QUOTA_EXCEEDED'],
    handler: async (r) => ({ data: await inbound.deliver(r.peer, r.body.signal, r.body.hops, r.requestId) }),
  },
  { method: 'post', path: '/federation/claim', auth: 'proof', body: PeerClaimBody, errors: [...PROOF_ERRORS, ...TASK_ERRORS], handler: async (r) => ({ data: await inbound.claim(r.peer, r.body.signal_id, r.body.agent, r.body.lease_ms, r.body.claim_token, r.requestId) }) },
  { method: 'post', path: '/federation/ack', auth: 'proof', body: PeerAckBody, errors: [...PROOF_ERRORS, ...TASK_ERRORS, 'SIGNAL_ACK_NOT_FOUND', 'SIGNAL_ACK_UNAUTHORIZED', 'SIGNAL_DELIVERY_INVALID_TRANSITION', 'FED_STATE_CONFLICT'], handler: async (r) => ({ data: await inbound.ack(r.peer, r.body.signal_id, r.body.agent, r.body.outcome, r.body.claim_token, { result: r.body.result, resources: r.body.resources }, r.requestId) }) },
  {
    method: 'post',
    path: '/federation/heartbeat',
    auth: 'proof',
    body: PeerHeartbeatBody,
    errors: [...PROOF_ERRORS, ...TASK_ERRORS, 'SIGNAL_ACK_UNAUTHORIZED'],
    handler: async (r) => ({ data: await inbound.heartbeat(r.peer, r.body.signal_id, r.body.agent, r.body, r.requestId) }),
  },
  { method: 'post', path: '/federation/cancel', auth: 'proof', body: PeerCancelBody, errors: [...PROOF_ERRORS, ...TASK_ERRORS, 'FED_STATE_CONFLICT'], handler: async (r) => ({ data: await inbound.cancel(r.peer, r.body.signal_id, r.requestId) }) },
  // a peer org reads memories shared to it (grantee_type org) through the same service calls as REST; it writes nothing
  {
    method: 'post',
    path: '/federation/memory/query',
    auth: 'proof',
    body: QueryBody,
    invalid: 'MEMORY_VALIDATION_FAILED',
    errors: [...PROOF_ERRORS, 'MEMORY_ORG_DENIED', 'EMBEDDING_PROVIDER_UNAVAILABLE', 'EMBEDDING_PROVIDER_ERROR', 'EMBEDDING_DIMENSION_MISMATCH'],
    handler: async (r) => ({ data: await memories.query(peerPrincipal(r.peer.id), r.body) }),
  },
  {
    method: 'get',
    path: '/federation/memory/recall/:entity',
    auth: 'proof',
    query: PageQuery,
    errors: [...PROOF_ERRORS],
    handler: async (r) => pageReply('memories', await memories.recall(peerPrincipal(r.peer.id), r.params.entity, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  { method: 'get', path: '/federation/memory/:id', auth: 'proof', errors: [...PROOF_ERRORS, 'MEMORY_NOT_FOUND'], handler: async (r) => ({ data: await memories.get(peerPrincipal(r.peer.id), r.params.id) }) },
];
