/** Invites: bootstrap while the instance has no identity, admin-only afterwards; redemption is one atomic commit. */
import { AppError } from '../errors.js';
import { iso, now } from '../clock.js';
import { newId, secretToken } from '../ids.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Op } from '../store/port.js';
import { committedEffect, effectOps, refuseLostClaim } from '../store/idempotency.js';
import { scanDesc, type Scanned } from '../store/scan.js';
import { auditOps } from '../audit/audit.js';
import type { Siwe } from '../auth/siwe.js';
import { standingOf, unrestricted } from '../auth/standing.js';
import { identityPlan } from './create.js';
import { indexes, keys, type Identity, type Invite, type McpProfile, type Principal } from './model.js';
import type { Registry } from './registry.js';
import { inviteSkill } from './skill.js';

export const IDENTITY_TYPES = ['human', 'agent'] as const;

export interface InviteCreate {
  name: string;
  type: string;
  is_admin?: boolean;
  expires_at?: string;
  mcp_profile?: McpProfile;
}

export interface WalletProof {
  wallet_address?: string;
  message?: string;
  signature?: string;
}

export interface InviteRedeem extends WalletProof {
  code: string;
  name: string;
  type: string;
  capabilities?: string[];
  tags?: string[];
  agent_8004_id?: string;
}

/** An invite as GET /admin/invites shows it: the code only while it can still be redeemed. */
export type InviteView = Omit<Invite, 'code'> & { code: string | null };

export class Invites {
  constructor(
    private rt: Runtime,
    private siwe: Siwe,
    private registry: Registry,
    private baseUrl: () => string,
  ) {}

  private get store() {
    return this.rt.store;
  }

  /** Without a principal this is the bootstrap path: allowed only while no identity exists. */
  async create(principal: Principal | undefined, body: InviteCreate, requestId: string): Promise<Invite> {
    if (!principal) {
      const [boot, count] = await Promise.all([this.store.get(keys.bootstrap), this.store.count(indexes.identities)]);
      if (boot || count > 0) throw new AppError('AUTH_KEY_MISSING', 'The instance is bootstrapped: creating invites needs an admin key');
    } else if (!principal.identity.is_admin) throw new AppError('AUTH_ADMIN_REQUIRED');
    const done = committedEffect<Invite>(principal);
    if (done) return done;
    if (body.expires_at && Date.parse(body.expires_at) <= now()) throw new AppError('INVITE_VALIDATION_FAILED', 'expires_at is in the past', { field: 'expires_at', reason: 'past' });
    const invite: Invite = {
      id: newId(),
      code: secretToken('inv_', 18),
      name: body.name,
      type: body.type,
      is_admin: principal ? body.is_admin === true : true,
      created_by: principal?.identity.id ?? null,
      created_at: iso(),
      redeemed_by: null,
      redeemed_at: null,
      expires_at: body.expires_at ? iso(Date.parse(body.expires_at)) : null,
      // the key redeemed from it carries no more than the key that made it
      standing: principal ? standingOf(principal.key) : unrestricted(),
      ...(body.mcp_profile ? { mcp_profile: body.mcp_profile } : {}),
    };
    const res = await this.store.commit([
      { op: 'put', key: keys.invite(invite.code), value: invite, expect: 0 },
      { op: 'index', index: indexes.invites, member: `${invite.id}:${invite.code}` },
      ...auditOps({ actor: invite.created_by, action: 'invite.create', target: invite.id, requestId, details: { name: invite.name, is_admin: invite.is_admin } }),
      ...effectOps(principal, invite),
    ]);
    refuseLostClaim(res);
    if (!res.ok) throw new AppError('INTERNAL_SERVER_ERROR', 'invite code collision');
    return invite;
  }

  private async usable(code: string) {
    const inv = await this.store.get<Invite>(keys.invite(code));
    if (!inv) throw new AppError('INVITE_NOT_FOUND');
    const invite = inv.value;
    if (invite.redeemed_by) throw new AppError('INVITE_ALREADY_REDEEMED');
    if (invite.expires_at && Date.parse(invite.expires_at) <= now()) throw new AppError('INVITE_EXPIRED', `The invite expired at ${invite.expires_at}`, { expires_at: invite.expires_at });
    return inv;
  }

  async redeem(body: InviteRedeem, requestId: string): Promise<{ identity: Identity; api_key: string }> {
    const proofFields = [body.wallet_address, body.message, body.signature].filter((f) => f !== undefined).length;
    if (proofFields !== 0 && proofFields !== 3) {
      const missing = (['wallet_address', 'message', 'signature'] as const).find((f) => body[f] === undefined);
      throw new AppError('INVITE_VALIDATION_FAILED', 'A wallet proof needs wallet_address, message and signature', { field: missing, reason: 'wallet_proof' });
    }
    await this.usable(body.code);
    if (body.agent_8004_id !== undefined) await this.registry.assertOwner(body.agent_8004_id, body.wallet_address ?? null, 'INVITE_VALIDATION_FAILED');
    return this.rt.retry(async () => {
      const inv = await this.usable(body.code);
      const invite = inv.value;
      // Only one bootstrap invite can ever be redeemed, however many were minted while the instance was empty.
      if (!invite.created_by && (await this.store.get(keys.bootstrap))) throw new AppError('INVITE_ALREADY_REDEEMED', 'The instance is already bootstrapped');
      const proof = body.wallet_address ? await this.siwe.proof(body.wallet_address, body.message!, body.signature!, 'INVITE_VALIDATION_FAILED') : undefined;
      const taken = new AppError('INVITE_VALIDATION_FAILED', `An identity named "${body.name}" exists`, { field: 'name', reason: 'taken' });
      const plan = await identityPlan(this.store, { ...body, is_admin: invite.is_admin, wallet_address: proof?.address ?? null, agent_8004_id: body.agent_8004_id ?? null }, taken, { standing: invite.standing ?? unrestricted(), key: true, mcp_profile: invite.mcp_profile });
      const now = plan.identity.created_at;
      const ops: Op[] = [
        { op: 'put', key: keys.invite(invite.code), value: { ...invite, redeemed_by: plan.identity.id, redeemed_at: now }, expect: inv.version },
        ...plan.ops,
        ...(proof?.ops ?? []),
        ...auditOps({ actor: plan.identity.id, action: 'invite.redeem', target: invite.id, requestId, details: { identity_id: plan.identity.id, ...plan.bound } }),
      ];
      if (!invite.created_by) ops.push({ op: 'put', key: keys.bootstrap, value: { identity_id: plan.identity.id, at: now }, expect: 0 });
      return { ops, result: { identity: plan.identity, api_key: plan.api_key! } };
    });
  }

  /** Newest first. */
  async list(before: string | undefined, limit: number): Promise<Scanned<InviteView>> {
    return scanDesc<InviteView>(this.store, [indexes.invites], {
      before,
      limit,
      load: async (members) => (await this.store.getMany<Invite>(members.map((m) => keys.invite(m.slice(m.indexOf(':') + 1))))).map((r) => r && view(r.value)),
      keep: () => true,
    });
  }

  /** The Markdown an agent reads to join with this invite. */
  async skill(code: string): Promise<string> {
    const inv = await this.usable(code);
    return inviteSkill(inv.value, this.baseUrl());
  }
}

const view = (i: Invite): InviteView => ({ ...i, expires_at: i.expires_at ?? null, code: i.redeemed_by || (i.expires_at && Date.parse(i.expires_at) <= now()) ? null : i.code });
