/** The one id generator: ULIDs, time-sortable and monotonic within a process. */
import { monotonicFactory } from 'ulid';
import { createHash, randomBytes } from 'node:crypto';

const ulid = monotonicFactory();
export const newId = (): string => ulid();
export const requestId = (): string => 'req_' + ulid();
export const secretToken = (prefix: string, bytes = 32): string => prefix + randomBytes(bytes).toString('base64url');
export const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
