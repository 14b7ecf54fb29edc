/** Who may touch shared content: the workspace, artifacts and workstreams belong to the org, so any active member. */
import { AppError } from '../errors.js';
import type { Principal } from '../identity/model.js';

export function requireMember(p: Principal): void {
  if (!p.membership || p.membership.status !== 'active') throw new AppError('POLICY_MEMBERSHIP_REQUIRED');
}
