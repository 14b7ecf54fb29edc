/**
 * Public join requests (AUTH_REQUEST_ENABLED): a wallet-signed request waits for an admin's review. Each
 * request is an auth-request actor. Approval creates the identity and its membership in the same commit as
 * the request's move to `approved`; the requester then signs in with SIWE.
 */
import type { AuthRequestContext } from '../../actors/auth-request.js';
import { AppError } from '../errors.js';
import { iso } from '../clock.js';
import { newId } from '../ids.js';
import type { ActorRecord, Runtime } from '../runtime/runtime.js';
import type { Op } from '../store/port.js';
import { scanDesc, type Scanned } from '../store/scan.js';
import { auditOps } from '../audit/audit.js';
import type { Siwe } from '../auth/siwe.js';
import { standingOf } from '../auth/standing.js';
import { AUTH_REQUEST, authRequestIndexes, authRequestView } from './auth-request-kind.js';
import { identityPlan } from './create.js';
import { keys, type Principal } from './model.js';
import type { Registry } from './registry.js';

export interface AuthRequestSubmit {
  name: string;
  type: string;
  wallet_address: string;
  message: string;
  signature: string;
  agent_8004_id?: string;
}

export type AuthRequest = ReturnType<typeof authRequestView>;

const INVALID = 'AUTH_REQUEST_VALIDATION_FAILED' as const;

export class AuthRequests {
  constructor(
    private rt: Runtime,
    private siwe: Siwe,
    private registry: Registry,
    private enabled: boolean,
  ) {}

  private get store() {
    return this.rt.store;
  }

  assertEnabled(): void {
    if (!this.enabled) throw new AppError('AUTH_REQUEST_DISABLED');
  }

  async submit(body: AuthRequestSubmit, requestId: string): Promise<AuthRequest> {
    this.assertEnabled();
    if (body.agent_8004_id !== undefined) await this.registry.assertOwner(body.agent_8004_id, body.wallet_address, INVALID);
    return this.rt.retry(async () => {
      const v = await this.siwe.proof(body.wallet_address, body.message, body.signature, INVALID);
      const [name, wallet] = await this.store.getMany([keys.identityName(body.name), keys.wallet(v.address)]);
      if (name) throw new AppError(INVALID, `An identity named "${body.name}" exists`, { field: 'name', reason: 'taken' });
      if (wallet) throw new AppError('IDENTITY_WALLET_DUPLICATE', `Wallet ${v.address} belongs to an identity: sign in with it`);
      const t = iso();
      const record: ActorRecord<AuthRequestContext> = {
        value: 'pending',
        context: { id: newId(), name: body.name, type: body.type, wallet_address: v.address, agent_8004_id: body.agent_8004_id ?? null, created_at: t, updated_at: t, reviewed_by: null, reviewed_at: null, identity_id: null },
      };
      const ops: Op[] = [
        ...v.ops,
        ...this.rt.createOps(AUTH_REQUEST, record.context.id, record, requestId),
        ...auditOps({ actor: null, action: 'auth_request.create', target: record.context.id, requestId, details: { name: body.name, wallet_address: v.address } }),
      ];
      return { ops, result: authRequestView(record) };
    });
  }

  /** Newest first; `status` narrows to one state. */
  async list(status: string | undefined, before: string | undefined, limit: number): Promise<Scanned<AuthRequest>> {
    return scanDesc(this.store, [status ? authRequestIndexes.byState(status) : authRequestIndexes.all], {
      before,
      limit,
      load: async (ids) => (await this.rt.loadMany<AuthRequestContext>(AUTH_REQUEST, ids)).map((r) => r && authRequestView(r)),
      keep: () => true,
    });
  }

  /** The identity (and its membership) is created in the commit of the request's move to approved. */
  async approve(admin: Principal, id: string): Promise<AuthRequest & { identity: unknown }> {
    const identityId = newId();
    let identity: unknown;
    const done = await this.rt.send<AuthRequestContext>(AUTH_REQUEST, id, { type: 'APPROVE', by: admin.identity.id, identity_id: identityId }, {
      requestId: admin.requestId,
      notFound: 'AUTH_REQUEST_NOT_FOUND',
      extra: async (next) => {
        const c = next.context;
        const taken = new AppError('IDENTITY_VALIDATION_FAILED', `An identity named "${c.name}" exists`, { field: 'name', reason: 'taken' });
        const plan = await identityPlan(this.store, { id: identityId, name: c.name, type: c.type, is_admin: false, wallet_address: c.wallet_address, agent_8004_id: c.agent_8004_id }, taken, { standing: standingOf(admin.key), key: false, by: admin.identity.id });
        identity = plan.identity;
        return [...plan.ops, ...auditOps({ actor: admin.identity.id, action: 'auth_request.approve', target: id, requestId: admin.requestId, details: { identity_id: identityId, ...plan.bound } })];
      },
    });
    return { ...authRequestView(done!.record), identity };
  }

  async reject(admin: Principal, id: string): Promise<AuthRequest> {
    const done = await this.rt.send<AuthRequestContext>(AUTH_REQUEST, id, { type: 'REJECT', by: admin.identity.id }, {
      requestId: admin.requestId,
      notFound: 'AUTH_REQUEST_NOT_FOUND',
      extra: () => auditOps({ actor: admin.identity.id, action: 'auth_request.reject', target: id, requestId: admin.requestId }),
    });
    return authRequestView(done!.record);
  }
}
