/** The auth request actor kind: its machine and the indexes a request implies (all, by state). */
import { authRequestMachine, type AuthRequestContext } from '../../actors/auth-request.js';
import type { ActorKind, ActorRecord } from '../runtime/runtime.js';

export const AUTH_REQUEST = 'auth-request';

export const authRequestIndexes = {
  all: 'auth-requests',
  byState: (state: string) => `auth-requests:state:${state}`,
};

export const authRequestKind: ActorKind<AuthRequestContext> = {
  name: AUTH_REQUEST,
  machine: authRequestMachine,
  notFound: 'AUTH_REQUEST_NOT_FOUND',
  invalid: 'AUTH_REQUEST_ALREADY_REVIEWED',
  indexes: (r) => [
    [authRequestIndexes.all, r.context.id],
    [authRequestIndexes.byState(r.value), r.context.id],
  ],
  timers: () => [],
};

/** The auth request as the API shows it: its context plus its state as status. */
export const authRequestView = (r: ActorRecord<AuthRequestContext>) => ({ ...r.context, status: r.value });
