/**
 * The single org record (one per instance). It is created only by the first invite redemption, whose
 * commit writes it with expect:0; a redemption that loses that race re-plans and joins the org that won.
 * `companyCreateOps` is the one way to write it; a commit holding those ops against an existing org fails
 * its check and `createCompany` answers ORG_ALREADY_EXISTS (docs/org.md).
 */
import { AppError } from '../errors.js';
import { iso } from '../clock.js';
import { newId } from '../ids.js';
import { indexes as identityIndexes, keys, type Company, type Membership } from '../identity/model.js';
import type { Op, Store } from '../store/port.js';
import { forEachPage } from '../store/scan.js';

export const newCompany = (name = 'default', now = iso()): Company => ({ id: newId(), name, created_at: now });

export const companyCreateOps = (c: Company): Op[] => [{ op: 'put', key: keys.company, value: c, expect: 0 }];

/** Writes a company record; a second one is refused: one org per instance. */
export async function createCompany(store: Store, name?: string): Promise<Company> {
  const c = newCompany(name);
  const res = await store.commit(companyCreateOps(c));
  if (!res.ok) throw new AppError('ORG_ALREADY_EXISTS');
  return c;
}

export interface MemberCounts {
  total: number;
  active: number;
  suspended: number;
  removed: number;
}

export class CompanyRecord {
  constructor(
    private store: Store,
    /** counts members by status; defaults to reading each identity's membership */
    private counts: () => Promise<MemberCounts> = () => countMemberships(store),
  ) {}

  async get(): Promise<Company & { member_counts: MemberCounts }> {
    const c = await this.store.get<Company>(keys.company);
    if (!c) throw new AppError('ORG_NOT_FOUND', 'No org yet: it is created on the first invite redemption');
    return { ...c.value, member_counts: await this.counts() };
  }
}

async function countMemberships(store: Store): Promise<MemberCounts> {
  const out: MemberCounts = { total: 0, active: 0, suspended: 0, removed: 0 };
  await forEachPage(store, identityIndexes.identities, async (ids) => {
    for (const m of await store.getMany<Membership>(ids.map(keys.membership))) {
      if (!m) continue;
      out.total++;
      out[m.value.status]++;
    }
  });
  return out;
}
