/**
 * The single org record (one per instance). It is created only by the first invite redemption, whose
 * commit writes it with expect:0; a redemption that loses that race re-plans and joins the org that won.
 * `companyCreateOps` is the one way to write it; a commit holding those ops against an existing org fails
 * its check and `createCompany` answers ORG_ALREADY_EXISTS (docs/org.md).
 */
import { AppError } from '../errors.js';
import { iso } from '../clock.js';
import { newId } from '../ids.js';
import { keys, type Company } from '../identity/model.js';
import type { Op, Store } from '../store/port.js';
import { memberCounts } from './memberships.js';

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
    private counts: () => Promise<MemberCounts> = () => memberCounts(store),
  ) {}

  async get(): Promise<Company & { member_counts: MemberCounts }> {
    const c = await this.store.get<Company>(keys.company);
    if (!c) throw new AppError('ORG_NOT_FOUND', 'No org yet: it is created on the first invite redemption');
    return { ...c.value, member_counts: await this.counts() };
  }
}
