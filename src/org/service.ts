/** Roles, rings and fills: plain records whose names are unique keys, written with compare-and-set. */
import { auditOps } from '../audit/audit.js';
import { AppError } from '../errors.js';
import { committedEffect, effectOps, refuseLostClaim } from '../store/idempotency.js';
import type { Principal } from '../identity/model.js';
import { iso } from '../clock.js';
import { newId } from '../ids.js';
import { keys as identityKeys } from '../identity/model.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Op, Store } from '../store/port.js';
import { loadAll, readAll } from '../store/scan.js';
import { orgIndexes, orgKeys, type Fill, type Ring, type Role } from './model.js';

export interface RoleBody {
  name?: string;
  purpose?: string;
  domains?: string[];
  duties?: string[];
}
export interface RingBody {
  name?: string;
  purpose?: string;
  members?: string[];
}

export class Org {
  constructor(private rt: Runtime) {}

  private get store(): Store {
    return this.rt.store;
  }

  listRoles = () => loadAll<Role>(this.store, orgIndexes.roles, orgKeys.role);
  listRings = () => loadAll<Ring>(this.store, orgIndexes.rings, orgKeys.ring);

  async role(id: string): Promise<Role> {
    const r = await this.store.get<Role>(orgKeys.role(id));
    if (!r) throw new AppError('ORG_ROLE_NOT_FOUND');
    return r.value;
  }

  async ring(id: string): Promise<Ring> {
    const r = await this.store.get<Ring>(orgKeys.ring(id));
    if (!r) throw new AppError('ORG_RING_NOT_FOUND');
    return r.value;
  }

  async roleByName(name: string): Promise<Role | undefined> {
    const ref = await this.store.get<{ id: string }>(orgKeys.roleName(name));
    return ref ? (await this.store.get<Role>(orgKeys.role(ref.value.id)))?.value : undefined;
  }

  async ringByName(name: string): Promise<Ring | undefined> {
    const ref = await this.store.get<{ id: string }>(orgKeys.ringName(name));
    return ref ? (await this.store.get<Ring>(orgKeys.ring(ref.value.id)))?.value : undefined;
  }

  /** Role ids the identity fills and ring ids it belongs to. */
  async placesOf(identityId: string): Promise<{ roles: string[]; rings: string[] }> {
    const [roles, rings] = await Promise.all([
      readAll(this.store, orgIndexes.rolesOf(identityId)),
      readAll(this.store, orgIndexes.ringsOf(identityId)),
    ]);
    return { roles, rings };
  }

  async fillersOf(roleId: string): Promise<string[]> {
    return readAll(this.store, orgIndexes.fillersOf(roleId));
  }

  /** A rename moves the unique name key in the same commit as the record. */
  private renameOps(nameKey: (n: string) => string, id: string, from: string | undefined, to: string): Op[] {
    if (from !== undefined && from.toLowerCase() === to.toLowerCase()) return [];
    return [
      ...(from !== undefined ? [{ op: 'del', key: nameKey(from) } as Op] : []),
      { op: 'put', key: nameKey(to), value: { id }, expect: 0 },
    ];
  }

  async createRole(body: Required<Pick<RoleBody, 'name'>> & RoleBody, by: Principal): Promise<Role> {
    const done = committedEffect<Role>(by);
    if (done) return done;
    const t = iso();
    const role: Role = { id: newId(), name: body.name, purpose: body.purpose ?? null, domains: body.domains ?? [], duties: body.duties ?? [], created_at: t, updated_at: t };
    const res = await this.store.commit([
      ...this.renameOps(orgKeys.roleName, role.id, undefined, role.name),
      { op: 'put', key: orgKeys.role(role.id), value: role, expect: 0 },
      { op: 'index', index: orgIndexes.roles, member: role.id },
      ...audited(by, 'role.create', role.id, { name: role.name }),
      ...effectOps(by, role),
    ]);
    refuseLostClaim(res);
    if (!res.ok) throw new AppError('ORG_ROLE_DUPLICATE', `A role named "${body.name}" exists`);
    return role;
  }

  async updateRole(id: string, body: RoleBody, by: Principal): Promise<Role> {
    return this.rt.retry(async () => {
      const cur = await this.store.get<Role>(orgKeys.role(id));
      if (!cur) throw new AppError('ORG_ROLE_NOT_FOUND');
      const next: Role = { ...cur.value, ...definedOf(body), updated_at: iso() };
      if (body.name !== undefined && body.name.toLowerCase() !== cur.value.name.toLowerCase() && (await this.store.get(orgKeys.roleName(body.name)))) {
        throw new AppError('ORG_ROLE_DUPLICATE', `A role named "${body.name}" exists`);
      }
      return { result: next, ops: [{ op: 'put', key: orgKeys.role(id), value: next, expect: cur.version }, ...this.renameOps(orgKeys.roleName, id, cur.value.name, next.name), ...audited(by, 'role.update', id)] };
    });
  }

  /** Deleting a role removes its fills; signals already routed to it stay readable. */
  async deleteRole(id: string, by: Principal): Promise<Role> {
    return this.rt.retry(async () => {
      const cur = await this.store.get<Role>(orgKeys.role(id));
      if (!cur) throw new AppError('ORG_ROLE_NOT_FOUND');
      const fillers = await this.fillersOf(id);
      const pairs = await this.store.getMany<{ id: string }>(fillers.map((i) => orgKeys.fillPair(id, i)));
      const ops: Op[] = [
        { op: 'del', key: orgKeys.role(id), expect: cur.version },
        { op: 'del', key: orgKeys.roleName(cur.value.name) },
        { op: 'index', index: orgIndexes.roles, member: id, remove: true },
        ...audited(by, 'role.delete', id, { name: cur.value.name }),
      ];
      fillers.forEach((identityId, i) => {
        const fillId = pairs[i]?.value.id;
        ops.push(...this.fillRemovalOps({ id: fillId ?? '', identity_id: identityId, role_id: id, created_at: '' }));
      });
      return { result: cur.value, ops };
    });
  }

  private async checkIdentities(ids: string[]): Promise<void> {
    const found = await this.store.getMany(ids.map(identityKeys.identity));
    const unknown = ids.filter((_, i) => !found[i]);
    if (unknown.length) throw new AppError('ORG_VALIDATION_FAILED', `Unknown identity ids: ${unknown.join(', ')}`, { field: 'members', unknown });
  }

  private memberOps(ringId: string, before: string[], after: string[]): Op[] {
    return [
      ...before.filter((m) => !after.includes(m)).map((m): Op => ({ op: 'index', index: orgIndexes.ringsOf(m), member: ringId, remove: true })),
      ...after.filter((m) => !before.includes(m)).map((m): Op => ({ op: 'index', index: orgIndexes.ringsOf(m), member: ringId })),
    ];
  }

  async createRing(body: Required<Pick<RingBody, 'name'>> & RingBody, by: Principal): Promise<Ring> {
    const done = committedEffect<Ring>(by);
    if (done) return done;
    const members = [...new Set(body.members ?? [])];
    await this.checkIdentities(members);
    const t = iso();
    const ring: Ring = { id: newId(), name: body.name, purpose: body.purpose ?? null, members, created_at: t, updated_at: t };
    const res = await this.store.commit([
      ...this.renameOps(orgKeys.ringName, ring.id, undefined, ring.name),
      { op: 'put', key: orgKeys.ring(ring.id), value: ring, expect: 0 },
      { op: 'index', index: orgIndexes.rings, member: ring.id },
      ...this.memberOps(ring.id, [], members),
      ...audited(by, 'ring.create', ring.id, { name: ring.name }),
      ...effectOps(by, ring),
    ]);
    refuseLostClaim(res);
    if (!res.ok) throw new AppError('ORG_RING_DUPLICATE', `A ring named "${body.name}" exists`);
    return ring;
  }

  async updateRing(id: string, body: RingBody, by: Principal): Promise<Ring> {
    if (body.members) await this.checkIdentities(body.members);
    return this.rt.retry(async () => {
      const cur = await this.store.get<Ring>(orgKeys.ring(id));
      if (!cur) throw new AppError('ORG_RING_NOT_FOUND');
      const next: Ring = { ...cur.value, ...definedOf(body), members: body.members ? [...new Set(body.members)] : cur.value.members, updated_at: iso() };
      if (body.name !== undefined && body.name.toLowerCase() !== cur.value.name.toLowerCase() && (await this.store.get(orgKeys.ringName(body.name)))) {
        throw new AppError('ORG_RING_DUPLICATE', `A ring named "${body.name}" exists`);
      }
      return {
        result: next,
        ops: [
          { op: 'put', key: orgKeys.ring(id), value: next, expect: cur.version },
          ...this.renameOps(orgKeys.ringName, id, cur.value.name, next.name),
          ...this.memberOps(id, cur.value.members, next.members),
          ...audited(by, 'ring.update', id),
        ],
      };
    });
  }

  async deleteRing(id: string, by: Principal): Promise<Ring> {
    return this.rt.retry(async () => {
      const cur = await this.store.get<Ring>(orgKeys.ring(id));
      if (!cur) throw new AppError('ORG_RING_NOT_FOUND');
      return {
        result: cur.value,
        ops: [
          { op: 'del', key: orgKeys.ring(id), expect: cur.version },
          { op: 'del', key: orgKeys.ringName(cur.value.name) },
          { op: 'index', index: orgIndexes.rings, member: id, remove: true },
          ...this.memberOps(id, cur.value.members, []),
          ...audited(by, 'ring.delete', id, { name: cur.value.name }),
        ],
      };
    });
  }

  async listFills(filter: { role_id?: string; identity_id?: string }): Promise<Fill[]> {
    const fills = await loadAll<Fill>(this.store, orgIndexes.fills, orgKeys.fill);
    return fills.filter((f) => (!filter.role_id || f.role_id === filter.role_id) && (!filter.identity_id || f.identity_id === filter.identity_id));
  }

  async createFill(identityId: string, roleId: string, by: Principal): Promise<Fill> {
    const done = committedEffect<Fill>(by);
    if (done) return done;
    const [identity, role] = await this.store.getMany([identityKeys.identity(identityId), orgKeys.role(roleId)]);
    if (!identity) throw new AppError('IDENTITY_NOT_FOUND');
    if (!role) throw new AppError('ORG_ROLE_NOT_FOUND');
    const fill: Fill = { id: newId(), identity_id: identityId, role_id: roleId, created_at: iso() };
    const res = await this.store.commit([
      { op: 'put', key: orgKeys.fillPair(roleId, identityId), value: { id: fill.id }, expect: 0 },
      // the role must still exist when the fill commits
      { op: 'check', key: orgKeys.role(roleId), expect: role.version },
      { op: 'put', key: orgKeys.fill(fill.id), value: fill, expect: 0 },
      { op: 'index', index: orgIndexes.fills, member: fill.id },
      { op: 'index', index: orgIndexes.fillersOf(roleId), member: identityId },
      { op: 'index', index: orgIndexes.rolesOf(identityId), member: roleId },
      ...audited(by, 'fill.create', fill.id, { identity_id: identityId, role_id: roleId }),
      ...effectOps(by, fill),
    ]);
    refuseLostClaim(res);
    if (!res.ok) {
      if (res.conflict === orgKeys.fillPair(roleId, identityId)) throw new AppError('ORG_FILL_DUPLICATE');
      throw new AppError('ORG_ROLE_NOT_FOUND');
    }
    return fill;
  }

  private fillRemovalOps(f: Fill): Op[] {
    return [
      ...(f.id ? [{ op: 'del', key: orgKeys.fill(f.id) } as Op, { op: 'index', index: orgIndexes.fills, member: f.id, remove: true } as Op] : []),
      { op: 'del', key: orgKeys.fillPair(f.role_id, f.identity_id) },
      { op: 'index', index: orgIndexes.fillersOf(f.role_id), member: f.identity_id, remove: true },
      { op: 'index', index: orgIndexes.rolesOf(f.identity_id), member: f.role_id, remove: true },
    ];
  }

  async deleteFill(id: string, by: Principal): Promise<Fill> {
    const cur = await this.store.get<Fill>(orgKeys.fill(id));
    if (!cur) throw new AppError('ORG_FILL_NOT_FOUND');
    const res = await this.store.commit([{ op: 'check', key: orgKeys.fill(id), expect: cur.version }, ...this.fillRemovalOps(cur.value), ...audited(by, 'fill.delete', id, { identity_id: cur.value.identity_id, role_id: cur.value.role_id })]);
    if (!res.ok) throw new AppError('ORG_FILL_NOT_FOUND');
    return cur.value;
  }
}

/** The audit entry of an org write, committed with it. */
const audited = (by: Principal, action: string, target: string, details?: Record<string, unknown>): Op[] =>
  auditOps({ actor: by.identity.id, action, target, requestId: by.requestId, details });

function definedOf<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
