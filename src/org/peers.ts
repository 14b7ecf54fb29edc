/**
 * Peer organizations: the peer actor kind (hosted by the runtime like the signal kind) and its service.
 * The endpoint is unique: a `peer-endpoint:` record written with expect:0 in the creating commit.
 */
import { newPeer, newTrustedPeer, peerMachine, peerTimers, PEER_STATUS_EVENT, type PeerContext, type PeerLimits, type PeerState } from '../../actors/peer.js';
import { AppError } from '../errors.js';
import type { Principal } from '../identity/model.js';
import { iso } from '../clock.js';
import { newId } from '../ids.js';
import type { ActorKind, ActorRecord, Runtime } from '../runtime/runtime.js';
import { actorKey } from '../runtime/runtime.js';
import { committedEffect, effectOps, refuseLostClaim } from '../store/idempotency.js';
import type { Op } from '../store/port.js';
import { readAll } from '../store/scan.js';

export const PEER = 'peer';

export const peerIndexes = { all: 'peers', byStatus: (s: string) => `peers:status:${s}` };
const endpointKey = (endpoint: string) => `peer-endpoint:${endpoint}`;

export const peerKind: ActorKind<PeerContext> = {
  name: PEER,
  machine: peerMachine,
  notFound: 'DISC_PEER_NOT_FOUND',
  invalid: 'DISC_PEER_INVALID_TRANSITION',
  indexes: (r) => [
    [peerIndexes.all, r.context.id],
    [peerIndexes.byStatus(r.value), r.context.id],
  ],
  timers: (r) => peerTimers(r.context),
  hidden: ['shared_secret'],
};

/** The peer as read routes show it: never the shared secret. */
export const peerView = (r: ActorRecord<PeerContext>) => {
  const { shared_secret: _s, ...fields } = r.context;
  return { ...fields, status: r.value as PeerState };
};
export type Peer = ReturnType<typeof peerView>;

/** One spelling per endpoint: scheme and host lower-cased by URL, no trailing slash. */
export function normalEndpoint(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new AppError('DISC_VALIDATION_FAILED', 'endpoint must be an absolute URL', { field: 'endpoint', reason: 'format' });
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new AppError('DISC_VALIDATION_FAILED', 'endpoint must be http or https', { field: 'endpoint', reason: 'format' });
  u.hash = '';
  return u.href.replace(/\/+$/, '');
}

export interface PeerCreate extends PeerLimits {
  name: string;
  endpoint: string;
  allowed_scopes?: string[];
}

export interface PeerTrust {
  shared_secret: string;
  expires_at: string;
}

/** what a request creating or establishing a peer answers for its record */
type Answer = (rec: ActorRecord<PeerContext>) => unknown;

export class Peers {
  constructor(private rt: Runtime) {}

  async create(by: Principal, body: PeerCreate): Promise<Peer> {
    return committedEffect<Peer>(by) ?? peerView(await this.insert(by, body, newId(), peerView));
  }

  /** A peer created with its trust, active at once; `id` is given when recording the other side of a trust. */
  async createTrusted(by: Principal, body: PeerCreate, trust: PeerTrust, id: string, answer: Answer): Promise<ActorRecord<PeerContext>> {
    return this.insert(by, body, id, answer, trust);
  }

  /** `answer`: what the request answers for the new peer, committed with it (an Idempotency-Key's effect) */
  private async insert(by: Principal, body: PeerCreate, id: string, answer: Answer, trust?: PeerTrust): Promise<ActorRecord<PeerContext>> {
    const endpoint = normalEndpoint(body.endpoint);
    const fields = { id, name: body.name, endpoint, allowed_scopes: body.allowed_scopes ?? [], rate_limit: body.rate_limit ?? null, storage_quota_bytes: body.storage_quota_bytes ?? null, created_by: by.identity.id, created_at: iso() };
    const rec = trust ? newTrustedPeer(fields, trust) : newPeer(fields);
    const res = await this.rt.store.commit([{ op: 'put', key: endpointKey(endpoint), value: { id }, expect: 0 }, ...this.rt.createOps(PEER, id, rec, by.requestId), ...effectOps(by, answer(rec))]);
    if (res.ok) return rec;
    refuseLostClaim(res);
    if (res.conflict === endpointKey(endpoint)) throw new AppError('DISC_PEER_DUPLICATE', `A peer with endpoint ${endpoint} exists`, { field: 'endpoint' });
    throw new AppError('DISC_PEER_DUPLICATE', `A peer with id ${id} exists`, { field: 'peer_id' });
  }

  /** The stored record, secret included: for the federation trust only, never for a read route. */
  async record(id: string): Promise<ActorRecord<PeerContext> | undefined> {
    return (await this.rt.load<PeerContext>(PEER, id))?.value;
  }

  async get(id: string): Promise<Peer> {
    const r = await this.rt.load<PeerContext>(PEER, id);
    if (!r) throw new AppError('DISC_PEER_NOT_FOUND');
    return peerView(r.value);
  }

  /** Every peer, newest first; or only those in `status`. */
  async list(status?: PeerState): Promise<Peer[]> {
    const ids = (await readAll(this.rt.store, status ? peerIndexes.byStatus(status) : peerIndexes.all)).reverse();
    const recs = await this.rt.loadMany<PeerContext>(PEER, ids);
    return recs.filter((r): r is ActorRecord<PeerContext> => r !== undefined).map(peerView);
  }

  async setStatus(by: Principal, id: string, status: Exclude<PeerState, 'pending'>): Promise<Peer> {
    const done = await this.rt.send<PeerContext>(PEER, id, { type: PEER_STATUS_EVENT[status] }, { requestId: by.requestId });
    return peerView(done!.record);
  }

  /** PATCH /org/company/peers/:id: the peer's own federation limits (null: the settings' defaults). */
  async setLimits(by: Principal, id: string, limits: PeerLimits): Promise<Peer> {
    const done = await this.rt.send<PeerContext>(PEER, id, { type: 'SET_LIMITS', ...limits }, { requestId: by.requestId });
    return peerView(done!.record);
  }

  /** Records a trust (a new secret, or the other side's) on an existing peer; a pending peer becomes active. */
  async establish(id: string, by: Principal, trust: PeerTrust, answer: Answer): Promise<ActorRecord<PeerContext>> {
    const done = await this.rt.send<PeerContext>(PEER, id, { type: 'ESTABLISH', by: by.identity.id, ...trust }, { requestId: by.requestId, extra: (rec) => effectOps(by, answer(rec)) });
    return done!.record;
  }

  /** Deletes the actor, its index entries and its endpoint record in one commit (version-checked). */
  async remove(id: string): Promise<Peer> {
    return this.rt.retry(async () => {
      const cur = await this.rt.load<PeerContext>(PEER, id);
      if (!cur) throw new AppError('DISC_PEER_NOT_FOUND');
      const ops: Op[] = [
        { op: 'del', key: actorKey(PEER, id), expect: cur.version },
        { op: 'del', key: endpointKey(cur.value.context.endpoint) },
        ...peerKind.indexes(cur.value).map(([index, member]): Op => ({ op: 'index', index, member, remove: true })),
      ];
      return { ops, result: peerView(cur.value) };
    });
  }
}
