/** The one id generator: ULIDs, time-sortable and monotonic within a process. */
import { monotonicFactory } from 'ulid';
import { createHash, randomBytes, randomFillSync } from 'node:crypto';

/**
 * ulid's default PRNG asks the system for one byte per character (16 calls per id); this draws the same
 * bytes from the same CSPRNG a pool at a time.
 */
const pool = Buffer.alloc(4096);
let at = pool.length;
const pooledRandom = (): number => {
  if (at === pool.length) {
    randomFillSync(pool);
    at = 0;
  }
  return pool[at++] / 256;
};

const ulid = monotonicFactory(pooledRandom);
export const newId = (): string => ulid();
export const requestId = (): string => 'req_' + ulid();
export const secretToken = (prefix: string, bytes = 32): string => prefix + randomBytes(bytes).toString('base64url');
export const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
