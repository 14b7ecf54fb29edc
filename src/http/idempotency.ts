/**
 * Safe retries of create routes: a request with an `Idempotency-Key` header is run once per (identity, key)
 * on the one idempotency store (src/store/idempotency.ts: 24 h by default). A retry with the same body gets
 * the first answer again, marked `Idempotent-Replayed: true`; the same key with another body is refused
 * (409 IDEMPOTENCY_KEY_REUSED). The claim lives as long as its attempt (a renewed lease): after a crash a
 * retry runs the request again, or answers the effect the dead attempt committed (`effectOps`).
 */
import { AppError } from '../errors.js';
import { IDEMPOTENCY_TTL_MS, IdempotencyRecords, type Claim } from '../store/idempotency.js';
import type { Reply } from './server.js';

export { IDEMPOTENCY_TTL_MS };

interface Answer {
  status: number;
  data: unknown;
  meta?: Record<string, unknown>;
  headers?: Record<string, string>;
}

/** the header's key space: no scope, as the records were first written */
const HEADER_SCOPE = '';

export class Idempotency extends IdempotencyRecords {
  /** Runs `exec` once for this identity and key; a retry with the same request answers the first reply. */
  async once(identity: string, key: string, request: string, exec: (claim: Claim) => Promise<Reply>): Promise<Reply> {
    if (key.length === 0 || key.length > 255) throw new AppError('VALIDATION_INVALID_TYPE', 'Idempotency-Key must be 1 to 255 characters', { field: 'Idempotency-Key', reason: 'length' });
    const begun = await this.begin<Answer>(identity, HEADER_SCOPE, key, request, () => new AppError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used with a different request', { field: 'Idempotency-Key' }));
    if ('replay' in begun) return { ...begun.replay, headers: { ...begun.replay.headers, 'idempotent-replayed': 'true' } };
    // only a JSON answer is kept; streams and web responses cannot be replayed
    // the handler runs with the claim on its principal: a service that supports it commits its effect with the claim
    return this.runAttempt(begun.claim, exec, (out): Answer | undefined =>
      out.raw || out.web || out.text ? undefined : { status: out.status ?? 200, data: out.data, ...(out.meta ? { meta: out.meta } : {}), ...(out.headers ? { headers: out.headers } : {}) },
    );
  }
}
