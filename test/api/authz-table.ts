/**
 * The authorization matrix's classification of every route of the live table (and of every /rpc method):
 * which key scope can deny it, with a request a key narrowed to that scope is refused on, and whether it
 * addresses another identity's resource, with the request and the exact code. `none` says why not.
 * test/api/authz-matrix.test.ts holds these tables to the live route table and method table exactly, so a
 * route or method added later fails the suite until it has a row here.
 */
import type { Member } from '../helpers/client.js';

/** The key scopes of src/identity/model.ts (permissions.* and ring_scopes), and a peer's allowed_scopes. */
export type Scope = 'signal_types' | 'rings' | 'task_types' | 'ring_scopes' | 'memory_scopes' | 'allowed_scopes';

/** What each scoped fixture key is narrowed to (every one owned by `member`); `memory_scopes` is `agent:<member>`. */
export const NARROWED = { signal_types: ['pulse'], rings: ['alpha'], task_types: ['build'], ring_scopes: ['alpha'] } as const;

/** The fixtures, made once per backend. Everything "other" owns is another identity's resource for `member`. */
export interface Fx {
  root: Member;
  member: Member;
  other: Member;
  /** an open task other sent: type task, payload.task_type deploy, no ring (outside every signal scope above) */
  task: string;
  /** a task other sent and holds under a lease */
  held: string;
  roleId: string;
  /** memories in `org` (outside member's memory_scopes key) and an edge between them */
  orgMem: string;
  orgMem2: string;
  orgEdge: string;
  /** memories in other's `agent:` namespace and an edge between them */
  otherMem: string;
  otherMem2: string;
  otherEdge: string;
  /** memories and an edge in a third identity's `agent:` namespace, shared to member read-only (a share grants no write) */
  lentMem: string;
  lentMem2: string;
  lentEdge: string;
  lenderId: string;
  privateArtifact: string;
  orgArtifact: string;
  workstream: string;
  /** other's active reservation */
  reservation: string;
  otherKeyId: string;
  otherMembership: string;
  /** MCP sessions opened by member and by other */
  mcp: { member: string; other: string };
}

export interface Req {
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** A refusal: the request, the exact status and the code (the envelope's, JSON-RPC's error.data, MCP's isError result). */
export interface Refusal {
  req: (f: Fx) => Req;
  status: number;
  code: string;
}
export interface ScopeCase extends Refusal {
  /** each scope a key can be narrowed to that refuses this request (one request per scoped key) */
  scopes: readonly Scope[];
}
export interface None {
  none: string;
}
export interface Row {
  scope: ScopeCase[] | None;
  other: Refusal[] | None;
}

export const SIGNAL_SCOPES = ['signal_types', 'rings', 'task_types', 'ring_scopes'] as const;
/** a task outside every signal scope of the narrowed keys: not a pulse, no ring, task_type deploy */
export const TASK_BODY = { signal_type: 'task', content: 'deploy it', payload: { task_type: 'deploy' } };

const none = (why: string): None => ({ none: why });
const req = (method: string, path: string, body?: unknown, headers?: Record<string, string>): Req => ({ method, path, body, headers });
const get = (path: string) => req('GET', path);
const post = (path: string, body: unknown = {}) => req('POST', path, body);
const scoped = (scopes: readonly Scope[], r: (f: Fx) => Req, status: number, code: string): ScopeCase => ({ scopes, req: r, status, code });
const refused = (r: (f: Fx) => Req, status: number, code: string): Refusal => ({ req: r, status, code });
const signalScoped = (r: (f: Fx) => Req, status = 403, code = 'AUTH_SCOPE_DENIED') => [scoped(SIGNAL_SCOPES, r, status, code)];
const memoryScoped = (r: (f: Fx) => Req, status: number, code: string) => [scoped(['memory_scopes'], r, status, code)];

export const rpc = (method: string, params: unknown): Req => post('/rpc', { jsonrpc: '2.0', id: 1, method, params });
const MCP_VERSION = '2025-06-18';
const mcp = (sid: string, body: unknown, method = 'POST'): Req => req(method, '/mcp', body, { 'mcp-session-id': sid, 'mcp-protocol-version': MCP_VERSION });
const tool = (sid: string, name: string, args: unknown) => mcp(sid, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } });
const a2a = (method: string, params: unknown): Req => post('/a2a', { jsonrpc: '2.0', id: 1, method, params });

const PUBLIC_SCOPE = 'public: no key is read, so no key scope applies';
const PUBLIC = { scope: none(PUBLIC_SCOPE), other: none('public: answers anyone alike and names no identity’s resource') };
const ADMIN_SCOPE = 'admin only: key scopes narrow signals and memories, not administration; the keys and wallet bindings an admin key grants stay inside its own scopes (keys minted: test/api/authz-keys-minted.test.ts)';
/** an admin route over org-level records (no identity owns them); a member is refused by the sweep */
const ADMIN = { scope: none(ADMIN_SCOPE), other: none('admin only (AUTH_ADMIN_REQUIRED, swept) over org-level records no identity owns') };
/** an admin route that grants what no key scope bounds: a scoped admin key is refused too (test/api/identity-keys-minted.test.ts) */
const ADMIN_GRANT = { scope: none('admin only, and an admin key narrowed by any scope is refused AUTH_SCOPE_DENIED: it grants what no key scope bounds (route flag `unscoped`; test/api/identity-keys-minted.test.ts, "grants nothing no key scope bounds")'), other: ADMIN.other };
/** an admin route naming another identity's resource: a member naming other's real id is refused */
const adminOver = (r: (f: Fx) => Req) => ({ scope: none(ADMIN_SCOPE), other: [refused(r, 403, 'AUTH_ADMIN_REQUIRED')] });
const ORG_READ = { scope: none('org structure is not key-scoped: scopes narrow signals and memories'), other: none('org records every member reads') };
const WORKSPACE = { scope: none('the workspace belongs to the org; key scopes narrow signals and memories only'), other: none('org-owned: any active member reads and writes it (docs/decisions.md)') };
const WORKSTREAM = { scope: none('workstreams belong to the org; key scopes apply to linked signals and memories (see POST /workstreams/:id/links)'), other: none('org-owned: any active member reads and writes it (docs/decisions.md)') };
const RESERVATION_READ = { scope: none('paths are not key-scoped'), other: none('advisory: every member reads every reservation') };
const PROOF = 'a peer’s signed call carries no API key; the peer’s allowed_scopes govern deliveries only';
const receiptAct = (path: string, extra: Record<string, unknown> = {}): Row => ({
  scope: signalScoped((f) => post(path, { signal_id: f.task, ...extra })),
  other: none('acts on the caller’s own receipt of a signal (a receipt is per identity); it names no other identity (docs/decisions.md)'),
});
const memNs = (make: (ns: string) => Req, status: number, code: string, writes = false): Row => ({
  scope: memoryScoped(() => make('org'), status, code),
  other: [refused((f) => make(otherNs(f)), status, code), ...(writes ? [refused((f) => make(`agent:${f.lenderId}`), 403, 'MEMORY_NAMESPACE_DENIED')] : [])],
});
const otherNs = (f: Fx) => `agent:${f.other.id}`;
/**
 * A memory route by id: an org memory for the narrowed key, other's memory for member (both answer as if
 * absent); a write route also refuses a memory member may only read (`lent`, shared read-only) with 403.
 */
const memById = (make: (id: string) => Req, code: string, ids: { org?: (f: Fx) => string; own?: (f: Fx) => string; lent?: (f: Fx) => string } = {}): Row => ({
  scope: memoryScoped((f) => make((ids.org ?? ((x) => x.orgMem))(f)), 404, code),
  other: [refused((f) => make((ids.own ?? ((x) => x.otherMem))(f)), 404, code), ...(ids.lent ? [refused((f) => make(ids.lent!(f)), 403, 'MEMORY_NAMESPACE_DENIED')] : [])],
});
const lentMem = { lent: (f: Fx) => f.lentMem };
const edgeIds = { org: (f: Fx) => f.orgEdge, own: (f: Fx) => f.otherEdge, lent: (f: Fx) => f.lentEdge };

export const ROUTES: Record<string, Row> = {
  'GET /health': PUBLIC,
  'GET /health/detailed': PUBLIC,
  'GET /docs/errors/:code': PUBLIC,
  'POST /invite/create': { scope: none('admin business once bootstrapped: key scopes narrow signals and memories, not administration'), other: none('makes an invite for a new identity; names no existing one') },
  'POST /invite': { scope: none(PUBLIC_SCOPE), other: none('the invite code is the credential; it names no identity') },
  'GET /invite/:code/skill': { scope: none(PUBLIC_SCOPE), other: none('the invite code is the credential; it names no identity') },

  'POST /emit': {
    scope: signalScoped(() => post('/emit', TASK_BODY)),
    other: [
      refused((f) => post('/emit', { signal_type: 'pulse', content: 'as other', from_identity: f.other.id }), 403, 'POLICY_IDENTITY_MISMATCH'),
      refused((f) => post('/emit', { signal_type: 'pulse', content: 'see this', resources: [{ kind: 'artifact', id: f.privateArtifact }] }), 404, 'ARTIFACT_NOT_FOUND'),
    ],
  },
  'POST /claim': { scope: signalScoped((f) => post('/claim', { signal_id: f.task })), other: [refused((f) => post('/claim', { signal_id: f.held }), 409, 'SIGNAL_CLAIM_CONFLICT')] },
  'POST /ack': { scope: signalScoped((f) => post('/ack', { signal_id: f.task })), other: [refused((f) => post('/ack', { signal_id: f.held }), 403, 'SIGNAL_ACK_UNAUTHORIZED')] },
  'GET /signals/list': {
    scope: [scoped(['signal_types'], () => get('/signals/list?type=task'), 403, 'AUTH_SCOPE_DENIED'), scoped(['rings', 'ring_scopes'], () => get('/signals/list?to_ring=beta'), 403, 'AUTH_SCOPE_DENIED')],
    other: none('the org’s signal log: every member reads every signal its key scopes allow (docs/decisions.md)'),
  },
  'GET /signals/:id/receipts': { scope: signalScoped((f) => get(`/signals/${f.task}/receipts`)), other: [refused((f) => get(`/signals/${f.task}/receipts`), 403, 'POLICY_DENIED')] },
  'GET /tasks/ready': { scope: none('lists only tasks the key’s scopes admit: the rest are left out, not refused'), other: none('the caller’s own ready work only: it takes no identity') },
  'POST /tasks/:id/retry': { scope: signalScoped((f) => post(`/tasks/${f.task}/retry`)), other: [refused((f) => post(`/tasks/${f.task}/retry`), 403, 'POLICY_DENIED')] },
  'POST /tasks/:id/heartbeat': { scope: signalScoped((f) => post(`/tasks/${f.task}/heartbeat`, {})), other: [refused((f) => post(`/tasks/${f.held}/heartbeat`, {}), 403, 'SIGNAL_ACK_UNAUTHORIZED')] },
  'POST /tasks/:id/cancel': { scope: signalScoped((f) => post(`/tasks/${f.task}/cancel`)), other: [refused((f) => post(`/tasks/${f.task}/cancel`), 403, 'POLICY_DENIED')] },
  'POST /tasks/:id/release': adminOver((f) => post(`/tasks/${f.held}/release`)),
  'GET /search': { scope: none('each source answers within the key\'s own rights: out-of-scope signals and unreadable namespaces are left out'), other: none('takes no identity: what the caller may read') },
  'GET /tasks/:id/graph': { scope: signalScoped((f) => get(`/tasks/${f.task}/graph`)), other: none('task graphs belong to the org: any member reads them within its key scopes') },
  'GET /thread/:id': { scope: signalScoped((f) => get(`/thread/${f.task}`)), other: none('threads belong to the org: any member reads them within its key scopes') },
  'GET /inbox/identity/:id': {
    scope: [scoped(['signal_types'], (f) => get(`/inbox/identity/${f.member.id}?type=task`), 403, 'AUTH_SCOPE_DENIED'), scoped(['rings', 'ring_scopes'], (f) => get(`/inbox/identity/${f.member.id}?ring=beta`), 403, 'AUTH_SCOPE_DENIED')],
    other: [refused((f) => get(`/inbox/identity/${f.other.id}`), 403, 'POLICY_DENIED')],
  },
  'GET /inbox/:target': {
    scope: [scoped(['signal_types'], () => get('/inbox/Builder?type=task'), 403, 'AUTH_SCOPE_DENIED'), scoped(['rings', 'ring_scopes'], () => get('/inbox/Builder?ring=beta'), 403, 'AUTH_SCOPE_DENIED')],
    other: [refused((f) => get(`/inbox/@${f.other.name}`), 403, 'POLICY_DENIED')],
  },
  'POST /inbox/acknowledge': receiptAct('/inbox/acknowledge'),
  'POST /inbox/resolve': receiptAct('/inbox/resolve'),
  'POST /inbox/snooze': receiptAct('/inbox/snooze', { until: '2999-01-01T00:00:00Z' }),
  'POST /inbox/unsnooze': receiptAct('/inbox/unsnooze'),

  'POST /roles': ADMIN,
  'GET /roles': ORG_READ,
  'GET /roles/:id': ORG_READ,
  'PUT /roles/:id': ADMIN,
  'DELETE /roles/:id': ADMIN,
  'POST /rings': ADMIN,
  'GET /rings': ORG_READ,
  'GET /rings/:id': ORG_READ,
  'PUT /rings/:id': ADMIN,
  'DELETE /rings/:id': ADMIN,
  'POST /fills': adminOver((f) => post('/fills', { identity_id: f.other.id, role_id: f.roleId })),
  'GET /fills': ORG_READ,
  'DELETE /fills/:id': ADMIN,

  'GET /admin/invites': ADMIN,
  'GET /admin/api-keys': adminOver(() => get('/admin/api-keys')),
  'POST /admin/api-keys': adminOver((f) => post('/admin/api-keys', { owner: f.other.id })),
  'POST /admin/api-keys/:id/revoke': adminOver((f) => post(`/admin/api-keys/${f.otherKeyId}/revoke`)),
  'POST /admin/api-keys/:id/rotate': adminOver((f) => post(`/admin/api-keys/${f.otherKeyId}/rotate`)),
  'GET /stats/overview': { scope: none('org-wide counts, no signal or memory content'), other: none('org-wide counts, no identity’s resource') },
  'GET /admin/health-metrics': ADMIN,

  'POST /workspace/folders': WORKSPACE,
  'GET /workspace/items': WORKSPACE,
  'GET /workspace/items/:id': WORKSPACE,
  'PATCH /workspace/items/:id': WORKSPACE,
  'DELETE /workspace/items/:id': WORKSPACE,
  'GET /workspace/deletions/:id': WORKSPACE,
  'POST /workspace/items/:id/move': WORKSPACE,
  'GET /workspace/items/:id/history': WORKSPACE,
  'POST /workspace/files/upload': WORKSPACE,
  'PUT /workspace/files/:id/content': WORKSPACE,
  'GET /workspace/files/:id/content': WORKSPACE,
  'GET /workspace/revisions/:id/content': WORKSPACE,

  'POST /artifacts/upload': { scope: none('artifacts are not key-scoped'), other: none('uploads the caller’s own artifact') },
  'GET /artifacts/list': { scope: none('artifacts are not key-scoped'), other: none('others’ private artifacts are left out of the list, not refused') },
  'GET /artifacts/:id': { scope: none('artifacts are not key-scoped'), other: [refused((f) => get(`/artifacts/${f.privateArtifact}?meta=true`), 404, 'ARTIFACT_NOT_FOUND')] },
  'DELETE /artifacts/:id': { scope: none('artifacts are not key-scoped'), other: [refused((f) => req('DELETE', `/artifacts/${f.orgArtifact}`), 403, 'ARTIFACT_DELETE_DENIED')] },
  'POST /artifacts/:id/share': { scope: none('artifacts are not key-scoped'), other: [refused((f) => post(`/artifacts/${f.privateArtifact}/share`), 404, 'ARTIFACT_NOT_FOUND')] },
  // public: the signed link is the credential; a forged one for other's private artifact is refused
  'GET /artifacts/:id/shared': { scope: none('public: the signed link is the credential, no key is read'), other: [refused((f) => get(`/artifacts/${f.privateArtifact}/shared?expires=9999999999&sig=forged`), 403, 'ARTIFACT_SHARE_INVALID')] },
  'POST /admin/artifacts/share-key/rotate': ADMIN,

  'GET /workstreams': WORKSTREAM,
  'POST /workstreams': WORKSTREAM,
  'GET /workstreams/:id': WORKSTREAM,
  'PATCH /workstreams/:id': WORKSTREAM,
  'GET /workstreams/:id/context': { scope: none('links the key’s scopes do not cover are hidden (counted in `hidden`), not refused'), other: none('links others may not see are hidden (counted in `hidden`), not refused') },
  'POST /workstreams/:id/links': {
    scope: [
      scoped(SIGNAL_SCOPES, (f) => post(`/workstreams/${f.workstream}/links`, { kind: 'signal', id: f.task }), 404, 'WORKSTREAM_LINK_TARGET_NOT_FOUND'),
      scoped(['memory_scopes'], (f) => post(`/workstreams/${f.workstream}/links`, { kind: 'memory', id: f.orgMem }), 404, 'WORKSTREAM_LINK_TARGET_NOT_FOUND'),
    ],
    other: [
      refused((f) => post(`/workstreams/${f.workstream}/links`, { kind: 'memory', id: f.otherMem }), 404, 'WORKSTREAM_LINK_TARGET_NOT_FOUND'),
      refused((f) => post(`/workstreams/${f.workstream}/links`, { kind: 'artifact', id: f.privateArtifact }), 404, 'WORKSTREAM_LINK_TARGET_NOT_FOUND'),
    ],
  },
  'DELETE /workstreams/:id/links': WORKSTREAM,

  'GET /auth/nonce': PUBLIC,
  'POST /auth/siwe-login': PUBLIC,
  'POST /siwe/login': PUBLIC,
  'POST /auth/attach-wallet': {
    // any scope refuses: the wallet's session keys would carry the binding key's standing beyond what it was given (checked before the proof)
    scope: [scoped([...SIGNAL_SCOPES, 'memory_scopes'], () => post('/auth/attach-wallet', { wallet_address: `0x${'1'.repeat(40)}`, message: 'm', signature: 's' }), 403, 'AUTH_SCOPE_DENIED')],
    other: none('binds a wallet to the caller itself; the SIWE signature proves the wallet, and replacing one needs the old wallet’s proof'),
  },
  'POST /auth-request': PUBLIC,
  'GET /auth-requests': ADMIN,
  'POST /auth-request/:id/approve': ADMIN,
  'POST /auth-request/:id/reject': ADMIN,
  'GET /identities': ADMIN,
  'GET /identities/:id': adminOver((f) => get(`/identities/${f.other.id}`)),
  'PUT /identities/:id': adminOver((f) => req('PUT', `/identities/${f.other.id}`, { name: 'renamed' })),
  'DELETE /admin/identity/:id': adminOver((f) => req('DELETE', `/admin/identity/${f.other.id}`)),
  'POST /admin/identity/:id/rebind-wallet': adminOver((f) => post(`/admin/identity/${f.other.id}/rebind-wallet`)),
  'GET /admin/audit': ADMIN,

  'POST /memory/store': memNs((ns) => post('/memory/store', { namespace: ns, content: 'not yours' }), 403, 'MEMORY_NAMESPACE_DENIED', true),
  'GET /memory/list': memNs((ns) => get(`/memory/list?namespace=${encodeURIComponent(ns)}`), 403, 'MEMORY_NAMESPACE_DENIED'),
  'POST /memory/query': memNs((ns) => post('/memory/query', { query: 'secret', namespace: ns, mode: 'keyword' }), 403, 'MEMORY_NAMESPACE_DENIED'),
  'POST /memory/forget': memById((id) => post('/memory/forget', { id }), 'MEMORY_NOT_FOUND', lentMem),
  'GET /memory/recall/:entity': { scope: none('reads every namespace the key may read: scopes narrow the set, nothing is refused'), other: none('others’ namespaces are left out of the answer, not refused') },
  'POST /memory/relate': {
    scope: memoryScoped((f) => post('/memory/relate', { from_id: f.orgMem, to_id: f.orgMem2, relation: 'r' }), 404, 'GRAPH_MEMORY_NOT_FOUND'),
    other: [
      refused((f) => post('/memory/relate', { from_id: f.otherMem, to_id: f.otherMem2, relation: 'r' }), 404, 'GRAPH_MEMORY_NOT_FOUND'),
      refused((f) => post('/memory/relate', { from_id: f.lentMem, to_id: f.lentMem2, relation: 'r' }), 403, 'MEMORY_NAMESPACE_DENIED'),
    ],
  },
  'GET /memory/relate/:id/edges': memById((id) => get(`/memory/relate/${id}/edges`), 'GRAPH_MEMORY_NOT_FOUND'),
  'PUT /memory/relate/:edge_id': memById((id) => req('PUT', `/memory/relate/${id}`, { relation: 'changed' }), 'GRAPH_EDGE_NOT_FOUND', edgeIds),
  'DELETE /memory/relate/:edge_id': memById((id) => req('DELETE', `/memory/relate/${id}`), 'GRAPH_EDGE_NOT_FOUND', edgeIds),
  'GET /memory/graph/:id': memById((id) => get(`/memory/graph/${id}`), 'GRAPH_MEMORY_NOT_FOUND'),
  'GET /memory/stats': { scope: none('counts only the namespaces the key may read; the rest are left out'), other: none('others’ namespaces are left out of the counts, not refused') },
  'POST /memory/admin/re-embed': adminOver((f) => post('/memory/admin/re-embed', { namespace: otherNs(f) })),
  'GET /memory/admin/re-embed/:job_id': ADMIN,
  'POST /memory/admin/export': adminOver((f) => post('/memory/admin/export', { namespace: otherNs(f) })),
  'GET /memory/admin/export/:job_id': ADMIN,
  'POST /memory/admin/import': ADMIN,
  'GET /memory/admin/import/:job_id': ADMIN,
  'POST /memory/admin/share': adminOver((f) => post('/memory/admin/share', { namespace: otherNs(f), grantee_type: 'identity', grantee: f.member.id })),
  'GET /memory/admin/shares': ADMIN,
  'DELETE /memory/admin/share/:id': ADMIN,
  'GET /memory/:id': memById((id) => get(`/memory/${id}`), 'MEMORY_NOT_FOUND'),
  'PATCH /memory/:id': memById((id) => req('PATCH', `/memory/${id}`, { content: 'overwritten' }), 'MEMORY_NOT_FOUND', lentMem),

  'GET /admin/actors': ADMIN,
  'GET /admin/connections': ADMIN,
  'GET /admin/actors/:kind/:id': adminOver((f) => get(`/admin/actors/reservation/${f.reservation}`)),
  'POST /admin/actors/:kind/:id/events': adminOver((f) => post(`/admin/actors/reservation/${f.reservation}/events`, { type: 'RELEASE', by: f.member.id })),
  'GET /org/company': ORG_READ,
  'GET /org/company/memberships': ADMIN,
  'POST /org/company/memberships': adminOver((f) => post('/org/company/memberships', { identity_id: f.other.id })),
  'PATCH /org/company/memberships/:id/status': adminOver((f) => req('PATCH', `/org/company/memberships/${f.otherMembership}/status`, { status: 'suspended' })),
  'PATCH /org/company/memberships/:id/claw-type': adminOver((f) => req('PATCH', `/org/company/memberships/${f.otherMembership}/claw-type`, { claw_type: 'observer' })),
  'POST /org/company/peers': ADMIN_GRANT,
  'GET /org/company/peers': ADMIN,
  'GET /org/company/peers/:id': ADMIN,
  'DELETE /org/company/peers/:id': ADMIN,
  'PATCH /org/company/peers/:id': ADMIN_GRANT,
  'PATCH /org/company/peers/:id/status': ADMIN_GRANT,
  'POST /org/company/peers/:id/establish': ADMIN_GRANT,
  'GET /admin/peers/:id/calls': ADMIN,
  'GET /admin/peers': ADMIN,
  'GET /discovery': { scope: none('the org directory is not key-scoped'), other: none('the directory every member reads') },
  'GET /admin/policy': ADMIN,
  'GET /admin/config': ADMIN,
  'POST /admin/webhooks': ADMIN_GRANT,
  'GET /admin/webhooks': ADMIN,
  'GET /admin/webhooks/:id': ADMIN,
  'PATCH /admin/webhooks/:id': ADMIN_GRANT,
  'DELETE /admin/webhooks/:id': ADMIN,
  'GET /admin/webhooks/:id/deliveries': ADMIN,
  'POST /admin/webhooks/deliveries/:id/replay': ADMIN,

  'POST /reservations': { scope: none('paths are not key-scoped'), other: none('grants what conflicts with nobody and reports the rest; it changes no one else’s reservation') },
  'GET /reservations': RESERVATION_READ,
  'GET /reservations/conflicts': RESERVATION_READ,
  'GET /reservations/:id': RESERVATION_READ,
  'POST /reservations/:id/renew': { scope: none('paths are not key-scoped'), other: [refused((f) => post(`/reservations/${f.reservation}/renew`, { ttl_s: 60 }), 403, 'RESERVATION_NOT_HOLDER')] },
  'POST /reservations/:id/release': { scope: none('paths are not key-scoped'), other: [refused((f) => post(`/reservations/${f.reservation}/release`), 403, 'RESERVATION_NOT_HOLDER')] },
  'POST /reservations/:id/force-release': { scope: none('paths are not key-scoped'), other: [refused((f) => post(`/reservations/${f.reservation}/force-release`), 403, 'RESERVATION_FORCE_DENIED')] },

  'POST /federation/trust': ADMIN_GRANT,
  'GET /federation/trust': ADMIN,
  // the proof routes are called as the trusted peer (signed), never with a key
  'POST /federation/deliver': {
    scope: [scoped(['allowed_scopes'], () => post('/federation/deliver', { signal: { id: 'remote-alert-1', signal_type: 'alert', content: 'not allowed' }, hops: 0 }), 403, 'FED_SCOPE_DENIED')],
    other: none('the peer delivers its own signal into this org; it names none of ours'),
  },
  'POST /federation/claim': { scope: none(PROOF), other: [refused((f) => post('/federation/claim', { signal_id: f.task, agent: 'peer-agent' }), 403, 'POLICY_CROSS_ORG_DENIED')] },
  'POST /federation/heartbeat': { scope: none(PROOF), other: [refused((f) => post('/federation/heartbeat', { signal_id: f.task, agent: 'peer-agent', lease_ms: 1000 }), 403, 'POLICY_CROSS_ORG_DENIED')] },
  'POST /federation/ack': { scope: none(PROOF), other: [refused((f) => post('/federation/ack', { signal_id: f.task, agent: 'peer-agent' }), 403, 'POLICY_CROSS_ORG_DENIED')] },
  'POST /federation/cancel': { scope: none(PROOF), other: [refused((f) => post('/federation/cancel', { signal_id: f.task, agent: 'peer-agent' }), 403, 'POLICY_CROSS_ORG_DENIED')] },
  'POST /federation/memory/query': { scope: none(PROOF), other: [refused((f) => post('/federation/memory/query', { query: 'secret', namespace: otherNs(f), mode: 'keyword' }), 403, 'MEMORY_ORG_DENIED')] },
  'GET /federation/memory/recall/:entity': { scope: none(PROOF), other: none('reads only namespaces shared to the peer’s org: the rest are left out, not refused') },
  'GET /federation/memory/:id': { scope: none(PROOF), other: [refused((f) => get(`/federation/memory/${f.otherMem}`), 404, 'MEMORY_NOT_FOUND')] },

  'GET /': PUBLIC,
  'GET /metrics': PUBLIC,
  'GET /openapi.json': PUBLIC,
  'GET /dashboard': PUBLIC,
  'GET /dashboard/:file': PUBLIC,
  'GET /dashboard/:dir/:file': PUBLIC,
  'GET /dashboard/vendor/diff/:file': PUBLIC,
  'GET /dashboard/vendor/diff/:dir/:file': PUBLIC,

  // one representative each; every method is classified in RPC_METHODS below
  'POST /rpc': {
    scope: [...signalScoped(() => rpc('signals.emit', TASK_BODY)), ...memoryScoped(() => rpc('memory.store', { namespace: 'org', content: 'x' }), 403, 'MEMORY_NAMESPACE_DENIED')],
    other: [refused((f) => rpc('memory.get', { id: f.otherMem }), 404, 'MEMORY_NOT_FOUND')],
  },
  // MCP answers a refused tool call 200 with isError (the protocol's rule); the code is the result's
  'POST /mcp': {
    scope: signalScoped((f) => tool(f.mcp.member, 'svc_emit_signal', TASK_BODY), 200),
    other: [
      // another identity's session: the SDK transport never sees it (JSON-RPC -32001, "Session not found")
      refused((f) => mcp(f.mcp.other, { jsonrpc: '2.0', id: 1, method: 'ping' }), 404, '-32001'),
      refused((f) => mcp(f.mcp.member, { jsonrpc: '2.0', id: 1, method: 'resources/read', params: { uri: `svc://inbox/${f.other.id}` } }), 200, 'POLICY_DENIED'),
    ],
  },
  'GET /mcp': { scope: none('the caller’s own session stream: notifications are filtered by the key’s scopes, not refused'), other: [refused((f) => mcp(f.mcp.other, undefined, 'GET'), 404, '-32001')] },
  'DELETE /mcp': { scope: none('ends the caller’s own session'), other: [refused((f) => mcp(f.mcp.other, undefined, 'DELETE'), 404, '-32001')] },
  'GET /.well-known/agent-card.json': PUBLIC,
  'POST /a2a': {
    scope: signalScoped(() => a2a('message/send', { message: { kind: 'message', messageId: 'authz-1', role: 'user', parts: [{ kind: 'text', text: 'out of scope' }], metadata: { signal_type: 'task' } } })),
    other: [refused((f) => a2a('tasks/cancel', { id: f.task }), 403, 'A2A_TASK_UNAUTHORIZED')],
  },
};

/** A method's classification: params instead of a request (the call goes to POST /rpc). Admin-only methods are refused to a member by the generated admin case. */
export interface MethodRefusal {
  params: (f: Fx) => unknown;
  status: number;
  code: string;
}
export interface MethodRow {
  scope: (MethodRefusal & { scopes: readonly Scope[] })[] | None;
  other: MethodRefusal[] | None;
}

const mScoped = (scopes: readonly Scope[], params: (f: Fx) => unknown, status = 403, code = 'AUTH_SCOPE_DENIED') => ({ scopes, params, status, code });
const mRefused = (params: (f: Fx) => unknown, status: number, code: string): MethodRefusal => ({ params, status, code });
const ADMIN_METHOD = { scope: none(ADMIN_SCOPE), other: none('admin only (the generated case) over org-wide lists') };
const CALLER_ONLY = { scope: none('answers the caller’s own record; out-of-scope signals are left out'), other: none('takes no identity: the caller’s own') };
const memMethod = (params: (ns: string) => unknown, status: number, code: string, writes = false): MethodRow => ({
  scope: [mScoped(['memory_scopes'], () => params('org'), status, code)],
  other: [mRefused((f) => params(otherNs(f)), status, code), ...(writes ? [mRefused((f) => params(`agent:${f.lenderId}`), 403, 'MEMORY_NAMESPACE_DENIED')] : [])],
});
const memMethodById = (params: (id: string) => unknown, code: string, writes = false): MethodRow => ({
  scope: [mScoped(['memory_scopes'], (f) => params(f.orgMem), 404, code)],
  other: [mRefused((f) => params(f.otherMem), 404, code), ...(writes ? [mRefused((f) => params(f.lentMem), 403, 'MEMORY_NAMESPACE_DENIED')] : [])],
});
const RESERVATION_METHOD_READ = { scope: none('paths are not key-scoped'), other: none('advisory: every member reads every reservation') };

export const RPC_METHODS: Record<string, MethodRow> = {
  'signals.emit': { scope: [mScoped(SIGNAL_SCOPES, () => TASK_BODY)], other: [mRefused((f) => ({ signal_type: 'pulse', content: 'as other', from_identity: f.other.id }), 403, 'POLICY_IDENTITY_MISMATCH')] },
  // each item answers on its own: the batch is 200 and the item carries the refusal
  'signals.batch_emit': {
    scope: [mScoped(SIGNAL_SCOPES, () => ({ signals: [TASK_BODY] }), 200)],
    other: [mRefused((f) => ({ signals: [{ signal_type: 'pulse', content: 'as other', from_identity: f.other.id }] }), 200, 'POLICY_IDENTITY_MISMATCH')],
  },
  'signals.search': { scope: [mScoped(['signal_types'], () => ({ type: 'task' })), mScoped(['rings', 'ring_scopes'], () => ({ ring: 'beta' }))], other: none('searches the org’s signal log, which every member reads within its scopes') },
  'inbox.check': { scope: [mScoped(['signal_types'], () => ({ type: 'task' })), mScoped(['rings', 'ring_scopes'], () => ({ ring: 'beta' }))], other: none('the caller’s own inbox only: it takes no identity') },
  'tasks.claim': { scope: [mScoped(SIGNAL_SCOPES, (f) => ({ signal_id: f.task }))], other: [mRefused((f) => ({ signal_id: f.held }), 409, 'SIGNAL_CLAIM_CONFLICT')] },
  'signals.ack': { scope: [mScoped(SIGNAL_SCOPES, (f) => ({ signal_id: f.task }))], other: [mRefused((f) => ({ signal_id: f.held }), 403, 'SIGNAL_ACK_UNAUTHORIZED')] },
  'thread.get': { scope: [mScoped(SIGNAL_SCOPES, (f) => ({ signal_id: f.task }))], other: none('threads belong to the org: any member reads them within its key scopes') },
  'identity.whoami': CALLER_ONLY,
  'roles.list': ORG_READ,
  'rings.list': ORG_READ,
  'webhooks.list': ADMIN_METHOD,
  'identities.list': ADMIN_METHOD,
  'tasks.mine': CALLER_ONLY,
  'tasks.ready': { scope: none('lists only tasks the key’s scopes admit: the rest are left out, not refused'), other: none('the caller’s own ready work only: it takes no identity') },
  'tasks.cancel': { scope: [mScoped(SIGNAL_SCOPES, (f) => ({ signal_id: f.task }))], other: [mRefused((f) => ({ signal_id: f.task }), 403, 'POLICY_DENIED')] },
  'tasks.release': { scope: none('admins only, refused by the service (POLICY_DENIED) before any scope: params are checked first, so the generated admin case cannot apply'), other: [mRefused((f) => ({ signal_id: f.held }), 403, 'POLICY_DENIED')] },
  'tasks.retry': { scope: [mScoped(SIGNAL_SCOPES, (f) => ({ signal_id: f.task }))], other: [mRefused((f) => ({ signal_id: f.task }), 403, 'POLICY_DENIED')] },
  'tasks.heartbeat': { scope: [mScoped(SIGNAL_SCOPES, (f) => ({ signal_id: f.task }))], other: [mRefused((f) => ({ signal_id: f.held }), 403, 'SIGNAL_ACK_UNAUTHORIZED')] },
  'tasks.graph': { scope: [mScoped(SIGNAL_SCOPES, (f) => ({ signal_id: f.task }))], other: none('task graphs belong to the org: any member reads them within its key scopes') },
  'workflow.resume': CALLER_ONLY,
  'workflow.next': { scope: none('skips tasks the key’s scopes refuse and claims the next (docs/surfaces.md)'), other: none('claims only open tasks: one another holds is skipped') },
  'memory.store': memMethod((ns) => ({ namespace: ns, content: 'not yours' }), 403, 'MEMORY_NAMESPACE_DENIED', true),
  'memory.get': memMethodById((id) => ({ id }), 'MEMORY_NOT_FOUND'),
  'memory.list': memMethod((ns) => ({ namespace: ns }), 403, 'MEMORY_NAMESPACE_DENIED'),
  'memory.query': memMethod((ns) => ({ query: 'secret', namespace: ns, mode: 'keyword' }), 403, 'MEMORY_NAMESPACE_DENIED'),
  'memory.recall': { scope: none('reads every namespace the key may read: scopes narrow the set'), other: none('others’ namespaces are left out, not refused') },
  'memory.update': memMethodById((id) => ({ id, content: 'overwritten' }), 'MEMORY_NOT_FOUND', true),
  'memory.forget': memMethodById((id) => ({ id }), 'MEMORY_NOT_FOUND', true),
  'memory.relate': {
    scope: [mScoped(['memory_scopes'], (f) => ({ from_id: f.orgMem, to_id: f.orgMem2, relation: 'r' }), 404, 'GRAPH_MEMORY_NOT_FOUND')],
    other: [mRefused((f) => ({ from_id: f.otherMem, to_id: f.otherMem2, relation: 'r' }), 404, 'GRAPH_MEMORY_NOT_FOUND'), mRefused((f) => ({ from_id: f.lentMem, to_id: f.lentMem2, relation: 'r' }), 403, 'MEMORY_NAMESPACE_DENIED')],
  },
  'reservations.create': { scope: none('paths are not key-scoped'), other: none('grants what conflicts with nobody and reports the rest') },
  'reservations.list': RESERVATION_METHOD_READ,
  'reservations.get': RESERVATION_METHOD_READ,
  'reservations.conflicts': RESERVATION_METHOD_READ,
  'reservations.renew': { scope: none('paths are not key-scoped'), other: [mRefused((f) => ({ id: f.reservation, ttl_s: 60 }), 403, 'RESERVATION_NOT_HOLDER')] },
  'reservations.release': { scope: none('paths are not key-scoped'), other: [mRefused((f) => ({ id: f.reservation }), 403, 'RESERVATION_NOT_HOLDER')] },
  'reservations.force_release': { scope: none('paths are not key-scoped'), other: [mRefused((f) => ({ id: f.reservation }), 403, 'RESERVATION_FORCE_DENIED')] },
  'handoff.create': {
    scope: [mScoped(SIGNAL_SCOPES, () => ({ to_role: 'Builder', summary: 'hand on', task_type: 'deploy' }))],
    other: [mRefused((f) => ({ to_role: 'Builder', summary: 'hand on', complete_claim: f.held }), 403, 'SIGNAL_ACK_UNAUTHORIZED')],
  },
};
