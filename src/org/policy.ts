/** GET /admin/policy: the rules in force, read from the one config and the interface's fixed limits. */
import type { Config } from '../config.js';

/** The interface's limit on federated signals. */
export const FEDERATION_MAX_HOPS = 1;

export function effectivePolicy(c: Readonly<Config>) {
  return {
    strict_signal_types: c.strictSignalTypes,
    membership_required: true,
    auth_request_enabled: c.authRequestEnabled,
    wallet_session_ttl_ms: c.siweSessionTtlMs,
    one_membership_per_identity: true,
    one_central_claw_per_org: true,
    /** requests per minute per key that names no rate_limit; 0 = unlimited */
    rate_limit_default: c.rateLimitDefault,
    /** live memories one namespace may hold (MEMORY_NAMESPACE_QUOTA); one more is 429 MEMORY_QUOTA_EXCEEDED */
    memory_quota: { per_namespace: c.memoryNamespaceQuota },
    federation_max_hops: FEDERATION_MAX_HOPS,
    lease: { task_lease_ms: c.taskLeaseMs, max_delivery_attempts: c.maxDeliveryAttempts },
    webhooks: { retry_window_ms: c.webhookRetryWindowMs, attempt_timeout_ms: c.webhookTimeoutMs, allow_private_network: c.allowPrivateNetwork },
  };
}
