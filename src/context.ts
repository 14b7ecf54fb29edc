/**
 * The request an async call chain serves, without threading it through every service signature: the front
 * end runs each request inside `withRequest`; authentication notes the identity; the runtime records the
 * request id on the transitions it commits, and the request log reads both.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface RequestScope {
  requestId: string;
  identityId?: string;
}

const scope = new AsyncLocalStorage<RequestScope>();

export const withRequest = <T>(s: RequestScope, fn: () => T): T => scope.run(s, fn);
export const currentRequestId = (): string | undefined => scope.getStore()?.requestId;
export function noteIdentity(identityId: string): void {
  const s = scope.getStore();
  if (s) s.identityId = identityId;
}
