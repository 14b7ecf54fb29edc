/**
 * Advisory path reservations (docs/reservations.md). A request is decided at once against the project's
 * active reservations and grants what does not conflict. Grants of one project are serialised through one
 * lock record whose version every granting commit checks, so two instances can never both grant
 * conflicting paths: the loser's commit fails, it re-reads and sees the winner's reservation.
 */
import type { ReservationContext } from '../../actors/reservation.js';
import { auditOps } from '../audit/audit.js';
import { now as clock, iso } from '../clock.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';
import type { Principal } from '../identity/model.js';
import type { ActorRecord, Runtime } from '../runtime/runtime.js';
import type { Claim, IdempotencyRecords } from '../store/idempotency.js';
import type { Op } from '../store/port.js';
import { readAll, scanDesc, type Scanned } from '../store/scan.js';
import { RESERVATION, reservationIndexes, reservationView, type Reservation } from './kind.js';
import { mayOverlap, normalizePath } from './overlap.js';

export interface ReserveRequest {
  paths: string[];
  exclusive?: boolean;
  ttl_s?: number;
  reason?: string;
  project?: string;
  idempotency_key?: string;
}

export interface Conflict {
  /** the requested (or checked) path */
  path: string;
  /** the reservation it collides with */
  reservation: Reservation;
}

export interface ReserveAnswer {
  granted: Reservation[];
  conflicts: Conflict[];
}

export interface ListQuery {
  project?: string;
  identity?: string;
  path?: string;
  include_expired?: boolean;
}

export interface ReservationLimits {
  defaultTtlS: number;
  maxTtlS: number;
}

/** When an identity was last seen (src/presence). */
export interface LastSeen {
  lastSeen(ids: string[]): Promise<(number | undefined)[]>;
}

const lockKey = (project: string) => `reservations:lock:${project}`;
/** a request as decided: its idempotency fingerprint */
interface Ask {
  project: string;
  exclusive: boolean;
  ttl_s: number;
  paths: string[];
  reason: string | null;
}

/** the key space of `idempotency_key` in the one idempotency store */
const IDEM_SCOPE = 'reservations';
const mismatch = () => new AppError('RESERVATION_IDEMPOTENCY_MISMATCH', undefined, { field: 'idempotency_key' });

const conflicting = (a: { identity: string; exclusive: boolean; path: string }, b: ReservationContext) =>
  a.identity !== b.identity && (a.exclusive || b.exclusive) && mayOverlap(a.path, b.path);

function member(p: Principal): void {
  if (!p.membership || p.membership.status !== 'active') throw new AppError('POLICY_MEMBERSHIP_REQUIRED');
}

export class Reservations {
  constructor(
    private rt: Runtime,
    private presence: LastSeen,
    private limits: ReservationLimits,
    private idempotency: IdempotencyRecords,
  ) {}

  /** Reservations are the org's: an active membership is needed for every call. */
  projectOf(p: Principal, project: string | undefined): string {
    member(p);
    return project ?? p.membership?.company_id ?? 'default';
  }

  private ttl(ttl: number | undefined): number {
    const t = ttl ?? this.limits.defaultTtlS;
    if (!Number.isInteger(t) || t < 1 || t > this.limits.maxTtlS) throw new AppError('RESERVATION_VALIDATION_FAILED', `ttl_s must be an integer from 1 to ${this.limits.maxTtlS}`, { field: 'ttl_s' });
    return t;
  }

  private paths(paths: string[]): string[] {
    const out = [...new Set(paths.map(normalizePath))];
    if (out.some((p) => !p || p.startsWith('!') || p.startsWith('/') || p.split('/').includes('..')))
      throw new AppError('RESERVATION_VALIDATION_FAILED', 'paths are relative globs: no leading "/" or "!", no ".." segment', { field: 'paths' });
    return out;
  }

  /** Active reservations of a project (those past expiry whose timer has not run yet count as gone). */
  private async active(project: string, at: number): Promise<ActorRecord<ReservationContext>[]> {
    const ids = await readAll(this.rt.store, reservationIndexes.active(project));
    const rows = await this.rt.loadMany<ReservationContext>(RESERVATION, ids);
    return rows.filter((r): r is ActorRecord<ReservationContext> => !!r && r.value === 'active' && r.context.expires_ms > at);
  }

  async reserve(p: Principal, req: ReserveRequest): Promise<ReserveAnswer> {
    const project = this.projectOf(p, req.project);
    const exclusive = req.exclusive ?? true;
    const ttl_s = this.ttl(req.ttl_s);
    const paths = this.paths(req.paths);
    const ask: Ask = { project, exclusive, ttl_s, paths, reason: req.reason ?? null };
    if (!req.idempotency_key) return this.grant(p, ask);
    const begun = await this.idempotency.begin<ReserveAnswer>(p.identity.id, IDEM_SCOPE, req.idempotency_key, JSON.stringify(ask), mismatch);
    if ('replay' in begun) return begun.replay;
    const claim = begun.claim;
    return this.idempotency.run(claim, () => this.grant(p, ask, claim), () => undefined);
  }

  /** Grants what does not conflict; a claimed idempotency key keeps the answer in the same commit. */
  private grant(p: Principal, { project, exclusive, ttl_s, paths, reason }: Ask, claim?: Claim): Promise<ReserveAnswer> {
    const identity = p.identity.id;
    return this.rt.serial(lockKey(project), () =>
      this.rt.retry(async () => {
        const lock = await this.rt.store.get<{ n: number }>(lockKey(project));
        const at = clock();
        const held = await this.active(project, at);
        const answer: ReserveAnswer = { granted: [], conflicts: [] };
        const ops: Op[] = [];
        let fence = lock?.value.n ?? 0;
        for (const path of paths) {
          const hits = held.filter((r) => conflicting({ identity, exclusive, path }, r.context));
          if (hits.length) {
            answer.conflicts.push(...hits.map((r) => ({ path, reservation: reservationView(r) })));
            continue;
          }
          const expires = at + ttl_s * 1000;
          const rec: ActorRecord<ReservationContext> = {
            value: 'active',
            context: { id: newId(), project, identity, path, exclusive, reason, ttl_s, created_at: iso(at), expires_at: iso(expires), expires_ms: expires, released_at: null, released_by: null, forced: false, fence: ++fence },
          };
          ops.push(...this.rt.createOps(RESERVATION, rec.context.id, rec, p.requestId));
          answer.granted.push(reservationView(rec));
        }
        // the lock's version moves with every grant: a concurrent grant that read the old set fails its commit; its count is the fencing token
        if (answer.granted.length) ops.push({ op: 'put', key: lockKey(project), value: { n: fence }, expect: lock?.version ?? 0 });
        if (claim) ops.push(this.idempotency.keepOp(claim, answer));
        return { ops: ops.length ? ops : undefined, result: answer };
      }),
    );
  }

  /** What these paths would hit: active reservations of other identities that could cover one of them. */
  async conflicts(p: Principal, paths: string[], project: string | undefined, exclusive = true): Promise<Conflict[]> {
    const held = await this.active(this.projectOf(p, project), clock());
    const out: Conflict[] = [];
    for (const path of this.paths(paths)) {
      for (const r of held) if (conflicting({ identity: p.identity.id, exclusive, path }, r.context)) out.push({ path, reservation: reservationView(r) });
    }
    return out;
  }

  async list(p: Principal, q: ListQuery, before: string | undefined, limit: number): Promise<Scanned<Reservation>> {
    const project = this.projectOf(p, q.project);
    const index = q.include_expired ? (q.identity ? reservationIndexes.identity(q.identity) : reservationIndexes.all(project)) : reservationIndexes.active(project);
    const path = q.path ? normalizePath(q.path) : undefined;
    const at = clock();
    return scanDesc<ActorRecord<ReservationContext>>(this.rt.store, [index], {
      before,
      limit,
      load: (ids) => this.rt.loadMany<ReservationContext>(RESERVATION, ids),
      keep: (r) =>
        r.context.project === project &&
        (q.include_expired || (r.value === 'active' && r.context.expires_ms > at)) &&
        (!q.identity || r.context.identity === q.identity) &&
        (!path || mayOverlap(path, r.context.path)),
    }).then((s) => ({ items: s.items.map(reservationView), cursor: s.cursor }));
  }

  async get(p: Principal, id: string): Promise<Reservation> {
    member(p);
    const r = await this.rt.load<ReservationContext>(RESERVATION, id);
    if (!r) throw new AppError('RESERVATION_NOT_FOUND');
    return reservationView(r.value);
  }

  async renew(p: Principal, id: string, ttl_s: number | undefined): Promise<Reservation> {
    member(p);
    const c = await this.rt.send<ReservationContext>(RESERVATION, id, { type: 'RENEW', by: p.identity.id, ttl_s: this.ttl(ttl_s) }, { requestId: p.requestId });
    return reservationView(c!.record);
  }

  async release(p: Principal, id: string): Promise<Reservation> {
    member(p);
    const c = await this.rt.send<ReservationContext>(RESERVATION, id, { type: 'RELEASE', by: p.identity.id }, { requestId: p.requestId });
    return reservationView(c!.record);
  }

  /** An admin, or anyone once the holder has been inactive (presence) longer than the reservation's ttl; audited. */
  async forceRelease(p: Principal, id: string): Promise<Reservation> {
    member(p);
    const cur = await this.rt.load<ReservationContext>(RESERVATION, id);
    if (!cur) throw new AppError('RESERVATION_NOT_FOUND');
    const c = cur.value.context;
    if (!p.identity.is_admin) {
      const [seen] = await this.presence.lastSeen([c.identity]);
      if (seen !== undefined && clock() - seen <= c.ttl_s * 1000) throw new AppError('RESERVATION_FORCE_DENIED', undefined, { holder: c.identity, last_seen: iso(seen) });
    }
    const audit = auditOps({ actor: p.identity.id, action: 'reservation.force_release', target: id, requestId: p.requestId, details: { holder: c.identity, path: c.path, project: c.project, admin: p.identity.is_admin } });
    const done = await this.rt.send<ReservationContext>(RESERVATION, id, { type: 'FORCE_RELEASE', by: p.identity.id }, { requestId: p.requestId, extra: () => audit });
    return reservationView(done!.record);
  }
}
