/**
 * The federation proof (docs/federation.md): `X-Federation-Peer-Id` names the trust, `X-Federation-Proof`
 * is `{ts, nonce, body_sha256, signature}` with signature = hex HMAC-SHA256(secret as UTF-8,
 * METHOD "\n" path "\n" ts "\n" nonce "\n" body_sha256). Pure: no store, no clock of its own.
 * Nonce memory and trust lookups are the caller's.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { AppError } from '../errors.js';

export const PEER_HEADER = 'x-federation-peer-id';
export const PROOF_HEADER = 'x-federation-proof';
/** How far a proof's `ts` may be from our clock, either way; nonces are remembered this long. */
export const SKEW_MS = 5 * 60_000;

export interface Proof {
  ts: number;
  nonce: string;
  body_sha256: string;
  signature: string;
}

const HEX = /^[0-9a-f]+$/;
const isHex = (s: unknown, len?: number): s is string => typeof s === 'string' && HEX.test(s) && (len === undefined ? s.length % 2 === 0 : s.length === len);

export const sha256Hex = (body: string | Uint8Array): string => createHash('sha256').update(body).digest('hex');

/** The string the HMAC covers; `path` is the request path without its query. */
export const signingString = (method: string, path: string, ts: number, nonce: string, bodySha256: string): string =>
  `${method.toUpperCase()}\n${path}\n${ts}\n${nonce}\n${bodySha256}`;

export const signatureOf = (secret: string, method: string, path: string, ts: number, nonce: string, bodySha256: string): string =>
  createHmac('sha256', Buffer.from(secret, 'utf8')).update(signingString(method, path, ts, nonce, bodySha256)).digest('hex');

/** A fresh proof for one outbound call. */
export function makeProof(secret: string, method: string, path: string, body: string | Uint8Array, ts: number, nonce: string = randomBytes(16).toString('hex')): Proof {
  const body_sha256 = sha256Hex(body);
  return { ts, nonce, body_sha256, signature: signatureOf(secret, method, path, ts, nonce, body_sha256) };
}

/** The two headers of an outbound federation call. */
export function proofHeaders(peerId: string, secret: string, method: string, path: string, body: string | Uint8Array, ts: number): Record<string, string> {
  return { 'X-Federation-Peer-Id': peerId, 'X-Federation-Proof': JSON.stringify(makeProof(secret, method, path, body, ts)) };
}

/** Parses the header's JSON: FED_PROOF_MISSING when absent, FED_PROOF_INVALID when malformed. */
export function parseProof(header: string | undefined): Proof {
  if (header === undefined || header === '') throw new AppError('FED_PROOF_MISSING');
  let p: unknown;
  try {
    p = JSON.parse(header);
  } catch {
    throw new AppError('FED_PROOF_INVALID', 'X-Federation-Proof is not JSON');
  }
  const o = p as Partial<Proof> | null;
  if (!o || typeof o !== 'object' || Array.isArray(o)) throw new AppError('FED_PROOF_INVALID', 'X-Federation-Proof must be a JSON object');
  if (!Number.isSafeInteger(o.ts) || (o.ts as number) < 0) throw new AppError('FED_PROOF_INVALID', 'ts must be Unix milliseconds (integer)', { field: 'ts' });
  if (!isHex(o.nonce) || o.nonce.length < 32 || o.nonce.length > 256) throw new AppError('FED_PROOF_INVALID', 'nonce must be at least 16 random bytes in lower-case hex', { field: 'nonce' });
  if (!isHex(o.body_sha256, 64)) throw new AppError('FED_PROOF_INVALID', 'body_sha256 must be 64 lower-case hex digits', { field: 'body_sha256' });
  if (!isHex(o.signature, 64)) throw new AppError('FED_PROOF_INVALID', 'signature must be 64 lower-case hex digits', { field: 'signature' });
  return { ts: o.ts as number, nonce: o.nonce, body_sha256: o.body_sha256, signature: o.signature };
}

const sameHex = (a: string, b: string): boolean => {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
};

/**
 * Checks a parsed proof against the raw body and the shared secret: FED_PROOF_INVALID for a skewed clock
 * (outside SKEW_MS), FED_PROOF_FAILED for a body digest or signature mismatch (both constant-time).
 * The nonce's single use is the caller's to enforce (FED_REPLAY_DETECTED) after this passes.
 */
export function verifyProof(proof: Proof, secret: string, method: string, path: string, body: string | Uint8Array, now: number): void {
  if (Math.abs(now - proof.ts) > SKEW_MS) throw new AppError('FED_PROOF_INVALID', 'ts is outside the 5-minute clock skew window', { field: 'ts', reason: 'skew' });
  if (!sameHex(sha256Hex(body), proof.body_sha256)) throw new AppError('FED_PROOF_FAILED', 'body_sha256 does not match the body');
  if (!sameHex(signatureOf(secret, method, path, proof.ts, proof.nonce, proof.body_sha256), proof.signature)) throw new AppError('FED_PROOF_FAILED');
}
