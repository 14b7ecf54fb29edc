/** Request schemas of the federation routes: trust (admin Bearer) and the peer calls (proof auth). */
import Type from 'typebox';
import { ClaimToken } from '../signals/schemas.js';
import { compile, Key } from '../validation.js';

const NonEmpty = Type.String({ minLength: 1 });
const Id = Type.String({ minLength: 1, maxLength: 64, pattern: '^[0-9A-Za-z_-]+$' });
const Scopes = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 100 });

/** A peer's own federation limits (docs/federation.md, Limits): null for the settings' defaults, 0 for none. */
export const PeerLimitFields = {
  rate_limit: Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: 1_000_000_000 }), Type.Null()])),
  storage_quota_bytes: Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), Type.Null()])),
};

/** POST /federation/trust: create (`expires_in`) or record the other side (`peer_id`, `shared_secret`, `expires_at`). */
export const TrustBody = compile(
  Type.Union([
    Type.Object({
      peer_id: Id,
      shared_secret: Type.String({ minLength: 16, maxLength: 512 }),
      name: Type.String({ minLength: 1, maxLength: 200 }),
      endpoint: Type.String({ minLength: 1, maxLength: 2000 }),
      allowed_scopes: Type.Optional(Scopes),
      expires_at: Type.String({ format: 'date-time' }),
      ...PeerLimitFields,
    }),
    Type.Object({
      name: Type.String({ minLength: 1, maxLength: 200 }),
      endpoint: Type.String({ minLength: 1, maxLength: 2000 }),
      allowed_scopes: Type.Optional(Scopes),
      expires_in: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 * 365 * 86_400 })),
      ...PeerLimitFields,
    }),
  ]),
);

export const EstablishBody = compile(Type.Object({ expires_in: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 * 365 * 86_400 })) }));

const Obj = Type.Record(Type.String(), Type.Unknown());
const Str = Type.String();

/** POST /federation/deliver: the origin's signal (its own fields; others it sends are ignored) and the hops it crossed. */
export const DeliverBody = compile(
  Type.Object({
    signal: Type.Object({
      id: Id,
      signal_type: Key('signal_type'),
      content: Type.String(),
      from_identity: Type.Optional(Type.Union([Str, Type.Null()])),
      from_role: Type.Optional(Type.Union([Str, Type.Null()])),
      to_role: Type.Optional(Type.Union([NonEmpty, Type.Null()])),
      to_ring: Type.Optional(Type.Union([NonEmpty, Type.Null()])),
      to_identity: Type.Optional(Type.Union([NonEmpty, Type.Null()])),
      parent_id: Type.Optional(Type.Union([NonEmpty, Type.Null()])),
      urgency: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
      tags: Type.Optional(Type.Array(Key('tag'))),
      metadata: Type.Optional(Obj),
      payload: Type.Optional(Obj),
      source_org: Type.Optional(Type.Union([Str, Type.Null()])),
    }),
    hops: Type.Integer({ minimum: 0 }),
  }),
);

/** POST /federation/claim|ack|cancel: the origin's signal id and the peer's agent identity id. */
const Agent = Type.String({ minLength: 1, maxLength: 200 });
export const PeerClaimBody = compile(Type.Object({ signal_id: Id, agent: Agent, lease_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })), claim_token: ClaimToken }));
/** a completion carries what the peer's agent reported: its result, and its resources (items in the peer's org) */
export const PeerAckBody = compile(
  Type.Object({
    signal_id: Id,
    agent: Agent,
    outcome: Type.Optional(Type.Union([Type.Literal('completed'), Type.Literal('failed')])),
    claim_token: ClaimToken,
    result: Type.Optional(Type.Unknown()),
    resources: Type.Optional(Type.Array(Type.Unknown(), { maxItems: 100 })),
  }),
);
/** POST /federation/heartbeat: the peer's holder extends the origin's lease and reports progress (docs/federation.md). */
export const PeerHeartbeatBody = compile(
  Type.Object({
    signal_id: Id,
    agent: Agent,
    lease_ms: Type.Integer({ minimum: 1, maximum: 86_400_000 }),
    progress: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    note: Type.Optional(Type.String({ maxLength: 4096 })),
  }),
);
export const PeerCancelBody = compile(Type.Object({ signal_id: Id, agent: Agent }));
