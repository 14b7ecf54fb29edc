/**
 * Sign-In with Ethereum: single-use nonces and the verification of a signed message (`siwe` parses,
 * `viem` recovers the EIP-191 signer). `verify` answers the signer and the ops that consume the nonce;
 * the caller commits them with whatever the sign-in writes, so a refused request consumes nothing.
 */
import { randomInt } from 'node:crypto';
import type { SiweMessage } from 'siwe';
import type { Address, Hex } from 'viem';
import { AppError, isAppError, type ErrorCode } from '../errors.js';
import { iso, now } from '../clock.js';
import type { Op, Store } from '../store/port.js';

interface NonceRecord {
  nonce: string;
  expires_at: number;
  used_at: string | null;
}

/** An expired nonce is remembered this long, so it answers SIWE_NONCE_EXPIRED rather than NOT_FOUND. */
const REMEMBER_MS = 86_400_000;
const SWEEP = 50;
const nonceKey = (n: string) => `siwe-nonce:${n}`;
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** EIP-4361 nonces are alphanumeric, at least 8 characters; 22 of 62 symbols is over 128 bits */
const generateNonce = () => Array.from({ length: 22 }, () => ALNUM[randomInt(ALNUM.length)]).join('');
/** siwe and viem take seconds to load: loaded on the first sign-in, not at startup */
const libs = async () => ({ ...(await import('siwe')), ...(await import('viem')) });
const NONCES = 'siwe-nonces';
/** index members sort by when the nonce may be forgotten */
const member = (r: NonceRecord) => `${String(r.expires_at + REMEMBER_MS).padStart(15, '0')}:${r.nonce}`;

export interface Verified {
  address: Address;
  message: SiweMessage;
  /** consume the nonce: commit with the sign-in */
  ops: Op[];
}

export class Siwe {
  constructor(
    private store: Store,
    private ttlMs: number,
    /** host[:port] of the service's public URL: a message must name it as its domain */
    private authority: () => string,
  ) {}

  /** A fresh nonce; the same commit forgets a few nonces past their day of remembrance. */
  async nonce(): Promise<{ nonce: string; expires_at: string }> {
    const rec: NonceRecord = { nonce: generateNonce(), expires_at: now() + this.ttlMs, used_at: null };
    const old = await this.store.range(NONCES, { lt: String(now()).padStart(15, '0'), limit: SWEEP });
    const ops: Op[] = [
      { op: 'put', key: nonceKey(rec.nonce), value: rec, expect: 0 },
      { op: 'index', index: NONCES, member: member(rec) },
      ...old.flatMap((m): Op[] => [
        { op: 'del', key: nonceKey(m.slice(16)) },
        { op: 'index', index: NONCES, member: m, remove: true },
      ]),
    ];
    if (!(await this.store.commit(ops)).ok) throw new AppError('INTERNAL_SERVER_ERROR', 'nonce collision');
    return { nonce: rec.nonce, expires_at: iso(rec.expires_at) };
  }

  /** Checks message, domain, signature, validity window and nonce, in that order; throws the SIWE_* code. */
  async verify(text: string, signature: string): Promise<Verified> {
    const { SiweMessage, getAddress, recoverMessageAddress } = await libs();
    let msg: SiweMessage;
    try {
      msg = new SiweMessage(text);
    } catch (e) {
      throw new AppError('SIWE_VALIDATION_FAILED', 'message is not an EIP-4361 (SIWE) message', { field: 'message', reason: String((e as Error)?.message ?? e).slice(0, 200) });
    }
    if (msg.domain !== this.authority()) throw new AppError('SIWE_DOMAIN_MISMATCH', `The message is for ${msg.domain}; this service is ${this.authority()}`, { expected: this.authority(), got: msg.domain });
    const address = getAddress(msg.address);
    if (!/^0x[0-9a-fA-F]{130}$/.test(signature)) throw new AppError('SIWE_VERIFICATION_FAILED', 'signature is not a 65-byte hex signature', { reason: 'signature' });
    let signer: Address | undefined;
    try {
      signer = await recoverMessageAddress({ message: text, signature: signature as Hex });
    } catch {
      signer = undefined;
    }
    if (signer !== address) throw new AppError('SIWE_VERIFICATION_FAILED', 'The signature is not the message address’s', { reason: 'signature' });
    const t = now();
    if (msg.expirationTime && Date.parse(msg.expirationTime) <= t) throw new AppError('SIWE_VERIFICATION_FAILED', 'The message has expired', { reason: 'expired' });
    if (msg.notBefore && Date.parse(msg.notBefore) > t) throw new AppError('SIWE_VERIFICATION_FAILED', 'The message is not valid yet', { reason: 'not_yet_valid' });
    const cur = await this.store.get<NonceRecord>(nonceKey(msg.nonce));
    if (!cur) throw new AppError('SIWE_NONCE_NOT_FOUND');
    if (cur.value.used_at) throw new AppError('SIWE_NONCE_USED');
    if (cur.value.expires_at <= t) throw new AppError('SIWE_NONCE_EXPIRED');
    return { address, message: msg, ops: [{ op: 'put', key: nonceKey(msg.nonce), value: { ...cur.value, used_at: iso(t) }, expect: cur.version }] };
  }

  /**
   * A wallet proof on another route (invite, attach-wallet, join request): the same checks, every
   * failure answered with the route's own validation code and the SIWE code as `details.reason`.
   */
  async proof(wallet: string, text: string, signature: string, code: ErrorCode): Promise<Verified> {
    let v: Verified;
    try {
      v = await this.verify(text, signature);
    } catch (e) {
      if (!isAppError(e) || !e.code.startsWith('SIWE_')) throw e;
      throw new AppError(code, `Wallet proof refused: ${e.message}`, { field: e.code === 'SIWE_VERIFICATION_FAILED' ? 'signature' : 'message', reason: e.code, ...(e.details?.reason ? { detail: e.details.reason } : {}) });
    }
    if (v.address.toLowerCase() !== wallet.toLowerCase()) throw new AppError(code, 'The message is signed for another address than wallet_address', { field: 'wallet_address', reason: 'address_mismatch' });
    return v;
  }
}
