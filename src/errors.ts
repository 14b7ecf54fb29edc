/** The error catalogue: every code of the interface's error table, each with its HTTP status. */
export const catalogue = {
  DB_CONNECT_FAILED: [503, 'Database unreachable'],
  DB_QUERY_TIMEOUT: [504, 'Query too slow'],
  STORE_FULL: [507, 'The store has no room for this write; reads still work; retry later'],
  DB_SCHEMA_APPLY_FAILED: [500, 'Schema migration failed on startup'],
  HEALTH_DB_UNREACHABLE: [503, 'Health check cannot reach the database'],
  VALIDATION_FIELD_REQUIRED: [400, 'A required field is missing'],
  VALIDATION_INVALID_TYPE: [400, 'A field has the wrong type or value'],
  SIGNAL_EMIT_INVALID_TYPE: [400, 'Invalid signal type'],
  SIGNAL_EMIT_VALIDATION_FAILED: [400, 'Emit body invalid'],
  SIGNAL_NOT_FOUND: [404, 'Signal, role or identity not found'],
  SIGNAL_CLAIM_CONFLICT: [409, 'Task already claimed by another agent'],
  SIGNAL_CLAIM_NOT_TASK: [422, 'Only task signals can be claimed'],
  SIGNAL_CLAIM_INVALID_STATUS: [422, 'Task status is not open'],
  SIGNAL_ACK_NOT_FOUND: [404, 'Signal to ack not found'],
  SIGNAL_ACK_UNAUTHORIZED: [403, 'Task is claimed by someone else'],
  SIGNAL_DELIVERY_INVALID_TRANSITION: [422, 'Invalid delivery transition'],
  SIGNAL_DEAD_LETTER: [422, 'Signal is dead-lettered'],
  AUTH_KEY_MISSING: [401, 'No Bearer API key'],
  AUTH_KEY_INVALID: [401, 'API key not found'],
  AUTH_KEY_REVOKED: [401, 'API key revoked'],
  AUTH_KEY_EXPIRED: [401, 'API key expired'],
  AUTH_ADMIN_REQUIRED: [403, 'Admin key required'],
  AUTH_SCOPE_DENIED: [403, 'Key lacks scope'],
  // not in the interface: a wallet whose binding key was revoked signs in again only after an admin re-binds it (docs/auth.md)
  AUTH_WALLET_BINDING_ENDED: [403, 'The key that bound this wallet is revoked; an admin must re-bind it'],
  AUTH_REQUEST_DISABLED: [403, 'Public auth requests are disabled'],
  AUTH_REQUEST_NOT_FOUND: [404, 'Auth request not found'],
  AUTH_REQUEST_ALREADY_REVIEWED: [409, 'Auth request already reviewed'],
  AUTH_REQUEST_VALIDATION_FAILED: [400, 'Auth request needs name, type, wallet_address, message, signature'],
  INVITE_NOT_FOUND: [404, 'Invite code unknown'],
  INVITE_ALREADY_REDEEMED: [409, 'Invite code already used'],
  INVITE_VALIDATION_FAILED: [400, 'Invite needs code, name, type'],
  ORG_ROLE_NOT_FOUND: [404, 'Role not found'],
  ORG_ROLE_DUPLICATE: [409, 'Role name exists'],
  ORG_RING_NOT_FOUND: [404, 'Ring not found'],
  ORG_RING_DUPLICATE: [409, 'Ring name exists'],
  ORG_FILL_NOT_FOUND: [404, 'Fill not found'],
  ORG_FILL_DUPLICATE: [409, 'Identity already fills role'],
  ORG_VALIDATION_FAILED: [400, 'Invalid org body'],
  ORG_ALREADY_EXISTS: [409, 'Org exists (single-org instance)'],
  ORG_NOT_FOUND: [404, 'Org not found'],
  ORG_MEMBERSHIP_DUPLICATE: [409, 'Identity already has a membership'],
  ORG_MEMBERSHIP_NOT_FOUND: [404, 'Membership not found'],
  ORG_CENTRAL_CLAW_EXISTS: [409, 'Central claw already exists'],
  // not in the interface: a membership move its state table does not allow (docs/org.md)
  ORG_MEMBERSHIP_INVALID_TRANSITION: [409, 'Membership cannot move that way'],
  SIWE_NONCE_NOT_FOUND: [404, 'Nonce unknown'],
  SIWE_NONCE_EXPIRED: [401, 'Nonce expired'],
  SIWE_NONCE_USED: [401, 'Nonce already used'],
  SIWE_VERIFICATION_FAILED: [401, 'Signature check failed'],
  SIWE_DOMAIN_MISMATCH: [401, 'Message domain mismatch'],
  SIWE_VALIDATION_FAILED: [400, 'SIWE body needs message and signature'],
  REGISTRY_UNAVAILABLE: [503, 'Agent registry unreachable'],
  REGISTRY_OWNER_MISMATCH: [403, 'Wallet does not own the claimed agent id'],
  REGISTRY_RESOLUTION_FAILED: [502, 'Agent registry error'],
  REGISTRY_AGENT_NOT_FOUND: [404, 'Agent id not in registry'],
  IDENTITY_WALLET_DUPLICATE: [409, 'Wallet already registered'],
  IDENTITY_NOT_FOUND: [404, 'Identity not found'],
  IDENTITY_VALIDATION_FAILED: [400, 'Invalid identity data'],
  RPC_PARSE_ERROR: [400, 'Body is not valid JSON'],
  RPC_INVALID_REQUEST: [400, 'Missing jsonrpc or method'],
  RPC_METHOD_NOT_FOUND: [404, 'Unknown method'],
  RPC_INVALID_PARAMS: [400, 'Params fail validation'],
  RPC_INTERNAL_ERROR: [500, 'Failure during method'],
  A2A_SIGNAL_TYPE_REQUIRED: [400, 'A2A message lacks a signal type'],
  A2A_CANCEL_FAILED: [422, 'Task cannot be cancelled'],
  A2A_TASK_UNAUTHORIZED: [403, 'Not authorized for the A2A task'],
  POLICY_DENIED: [403, 'Denied by policy'],
  POLICY_IDENTITY_MISMATCH: [403, 'from_identity differs from the authenticated identity'],
  POLICY_MEMBERSHIP_REQUIRED: [403, 'No active org membership'],
  POLICY_CROSS_ORG_DENIED: [403, 'Cross-org access denied'],
  DISC_PEER_NOT_FOUND: [404, 'Peer org not found'],
  DISC_PEER_DUPLICATE: [409, 'Peer with the same endpoint exists'],
  DISC_VALIDATION_FAILED: [400, 'Invalid discovery request'],
  // not in the interface: a peer status move its state table does not allow (docs/org.md)
  DISC_PEER_INVALID_TRANSITION: [409, 'Peer status cannot move that way'],
  // Webhooks: the interface names the routes but no codes; these follow its pattern (docs/decisions.md).
  WEBHOOK_VALIDATION_FAILED: [400, 'Invalid webhook request'],
  WEBHOOK_NOT_FOUND: [404, 'Webhook not found'],
  WEBHOOK_DELIVERY_NOT_FOUND: [404, 'Webhook delivery not found'],
  WEBHOOK_DELIVERY_IN_PROGRESS: [409, 'The delivery is being sent; replay it once the attempt has ended'],
  FED_PROOF_MISSING: [401, 'No X-Federation-Proof'],
  FED_PROOF_INVALID: [401, 'Malformed proof'],
  FED_PROOF_FAILED: [401, 'HMAC mismatch'],
  FED_PEER_MISSING: [401, 'No X-Federation-Peer-Id'],
  FED_PEER_DENIED: [403, 'Peer inactive or unknown'],
  FED_REPLAY_DETECTED: [403, 'Nonce reused'],
  FED_SCOPE_DENIED: [403, 'Signal type not in allowed_scopes'],
  FED_DELIVERY_FAILED: [502, 'Outbound delivery failed'],
  FED_TRUST_NOT_ESTABLISHED: [403, 'No shared secret'],
  FED_TRUST_EXPIRED: [403, 'Trust expired'],
  FED_HOP_LIMIT: [400, 'Signal already federated once'],
  // not in the interface: a peer's storage quota (docs/federation.md, Limits); 429 as MEMORY_QUOTA_EXCEEDED, so a sender retries
  FED_QUOTA_EXCEEDED: [429, "The peer's storage quota is reached"],
  RATE_LIMIT_EXCEEDED: [429, 'Too many requests'],
  MEMORY_VALIDATION_FAILED: [400, 'Memory needs namespace and content'],
  MEMORY_NOT_FOUND: [404, 'Memory or job not found'],
  MEMORY_NAMESPACE_DENIED: [403, 'Namespace ACL refusal'],
  MEMORY_QUOTA_EXCEEDED: [429, 'Namespace memory limit reached'],
  MEMORY_ORG_DENIED: [403, 'Cross-org memory access'],
  MEMORY_SHARE_NOT_FOUND: [404, 'Share not found'],
  GRAPH_EDGE_NOT_FOUND: [404, 'Edge not found'],
  GRAPH_MEMORY_NOT_FOUND: [404, 'Memory node not found'],
  GRAPH_SELF_REFERENCE: [400, 'Edge from a memory to itself'],
  EMBEDDING_DIMENSION_MISMATCH: [400, 'Wrong vector dimensions'],
  EMBEDDING_PROVIDER_ERROR: [502, 'Embedding provider error'],
  EMBEDDING_PROVIDER_UNAVAILABLE: [503, 'No embedding provider configured'],
  INTERNAL_SERVER_ERROR: [500, 'Unexpected error'],
  INTERNAL_HTTP_ERROR: [500, 'HTTP-level error'],
  NOT_FOUND: [404, 'Route not found'],
  // Not in the interface's table: the body size cap, invite expiry and push limits need codes of their own (see docs/decisions.md).
  PAYLOAD_TOO_LARGE: [413, 'Request body exceeds the size cap'],
  PUSH_CONSUMER_TOO_SLOW: [429, 'Push consumer fell too far behind; reconnect and resume from your last cursor'],
  INVITE_EXPIRED: [410, 'Invite code expired'],
  PUSH_CURSOR_EXPIRED: [410, 'The journal no longer holds changes after this cursor; re-read your inbox, then resume from a current cursor'],
  // Workspace, artifacts, workstreams: the interface names the routes but no codes; these follow its pattern (see docs/decisions.md).
  RANGE_NOT_SATISFIABLE: [416, 'The requested byte range lies outside the content'],
  WORKSPACE_VALIDATION_FAILED: [400, 'Invalid workspace request'],
  WORKSPACE_ITEM_NOT_FOUND: [404, 'Workspace item not found'],
  WORKSPACE_REVISION_NOT_FOUND: [404, 'Workspace revision not found'],
  WORKSPACE_NAME_CONFLICT: [409, 'An item with this name exists in the target folder'],
  WORKSPACE_MOVE_CYCLE: [422, 'A folder cannot move into itself or its own subtree'],
  WORKSPACE_NOT_A_FOLDER: [422, 'The parent is not a folder'],
  WORKSPACE_NOT_A_FILE: [422, 'The item is not a file'],
  WORKSPACE_REVISION_MISMATCH: [412, 'If-Match names a revision that is no longer current'],
  WORKSPACE_FOLDER_DELETING: [409, 'The folder is inside a folder being deleted'],
  ARTIFACT_VALIDATION_FAILED: [400, 'Invalid artifact request'],
  ARTIFACT_NOT_FOUND: [404, 'Artifact not found'],
  ARTIFACT_DELETE_DENIED: [403, 'Only the uploader or an admin may delete an artifact'],
  ARTIFACT_SHARE_INVALID: [403, 'Share link tampered with or expired'],
  WORKSTREAM_VALIDATION_FAILED: [400, 'Invalid workstream request'],
  WORKSTREAM_NOT_FOUND: [404, 'Workstream not found'],
  WORKSTREAM_LINK_TARGET_NOT_FOUND: [404, 'The linked resource does not exist or is not visible'],
  WORKSTREAM_LINK_NOT_FOUND: [404, 'The workstream has no such link'],
  // Idempotency-Key on create routes: the interface has no codes for a reused or still-running key (see docs/decisions.md).
  IDEMPOTENCY_KEY_REUSED: [409, 'This Idempotency-Key was used with a different request'],
  IDEMPOTENCY_KEY_IN_PROGRESS: [409, 'A request with this Idempotency-Key is still running; retry later'],
  // path reservations (docs/reservations.md): not in the interface
  RESERVATION_VALIDATION_FAILED: [400, 'Invalid reservation request'],
  RESERVATION_NOT_FOUND: [404, 'Reservation not found'],
  RESERVATION_NOT_HOLDER: [403, 'Only the holder may renew or release a reservation'],
  RESERVATION_NOT_ACTIVE: [409, 'Reservation is released or expired'],
  RESERVATION_FORCE_DENIED: [403, 'Force-release needs an admin, or a holder inactive longer than the ttl'],
  RESERVATION_IDEMPOTENCY_MISMATCH: [409, 'idempotency_key was used with a different request'],
  // a browser's Origin other than BASE_URL's or ALLOWED_ORIGINS (DNS rebinding, cross-site requests): not in the interface (docs/auth.md)
  ORIGIN_NOT_ALLOWED: [403, 'Origin not allowed'],
  // a peer's ack or cancel meeting another outcome of the task (docs/federation.md, Conflicts): not in the interface
  FED_STATE_CONFLICT: [409, "The other organization's copy of this task has another outcome; the call was not applied"],
  // the `svc` client's own: no answer from the service at all (refused, timed out); never sent by the service (docs/agents.md)
  SERVICE_UNREACHABLE: [503, 'The service could not be reached'],
} as const satisfies Record<string, readonly [number, string]>;

export type ErrorCode = keyof typeof catalogue;

export class AppError extends Error {
  readonly status: number;
  /** response headers the error carries (Retry-After and RateLimit-* on RATE_LIMIT_EXCEEDED) */
  headers?: Record<string, string>;
  constructor(readonly code: ErrorCode, message?: string, readonly details: Record<string, unknown> | null = null) {
    super(message ?? catalogue[code][1]);
    this.status = catalogue[code][0];
  }
}

export const isAppError = (e: unknown): e is AppError => e instanceof AppError;

/** Codes whose own message and details describe the service's insides (a collision, a missing blob, a cycle). */
const INTERNAL = new Set<ErrorCode>(['INTERNAL_SERVER_ERROR', 'INTERNAL_HTTP_ERROR', 'RPC_INTERNAL_ERROR', 'DB_SCHEMA_APPLY_FAILED']);

/** A failure as a client may see it, on every surface. */
export interface ClientError {
  status: number;
  code: ErrorCode;
  message: string;
  details: Record<string, unknown> | null;
  headers?: Record<string, string>;
  /** the client sees less than the error holds (or it was not an AppError at all): log the error itself */
  hidden: boolean;
}

/** a store outage: every request meets it at once, and the background loops already log it (once a window) */
const OUTAGE: ReadonlySet<string> = new Set(['DB_CONNECT_FAILED', 'DB_QUERY_TIMEOUT', 'STORE_FULL']);

/**
 * The one rule for what leaves the service: a thrown non-AppError is INTERNAL_SERVER_ERROR; any 5xx answers
 * its catalogue message only (its own message may carry a driver's text, a host, a path or a hash), and an
 * internal code (`INTERNAL`) answers no details either. 4xx messages and details are written for clients.
 */
export function clientError(e: unknown): ClientError {
  if (!isAppError(e)) return { status: 500, code: 'INTERNAL_SERVER_ERROR', message: catalogue.INTERNAL_SERVER_ERROR[1], details: null, hidden: true };
  const base = { status: e.status, code: e.code, headers: e.headers };
  if (e.status < 500) return { ...base, message: e.message, details: e.details, hidden: false };
  const message = catalogue[e.code][1];
  const details = INTERNAL.has(e.code) ? null : e.details;
  return { ...base, message, details, hidden: !OUTAGE.has(e.code) && (message !== e.message || details !== e.details) };
}

/** `docsBase` is `${BASE_URL}/docs/errors/`: the service serves a page for every code. Takes anything thrown (`clientError`). */
export function errorBody(e: unknown, requestId: string, docsBase: string) {
  const c = clientError(e);
  return {
    error: { code: c.code, message: c.message, request_id: requestId, details: c.details, docs_url: docsBase + c.code },
  };
}
