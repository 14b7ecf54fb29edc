/**
 * Sign-In with Ethereum: stateless signed nonces and the verification of a signed message (`siwe` parses,
 * `viem` recovers the EIP-191 signer). A nonce carries its expiry and an HMAC over it, so issuing one writes
 * nothing; `verify` answers the signer and the ops that write the nonce's single-use mark, which the caller
 * commits with whatever the sign-in writes, so a refused request consumes nothing.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { SiweMessage } from 'siwe';
import type { Address, Hex } from 'viem';
import { AppError, isAppError, type ErrorCode } from '../errors.js';
import { iso, now } from '../clock.js';
import type { Op, Store } from '../store/port.js';

/** A used nonce's mark: kept until the nonce expires, when its expiry alone refuses it. */
interface UsedMark {
  nonce: string;
  expires_at: number;
  used_at: string;
}

const SWEEP = 50;
const nonceKey = (n: string) => `siwe-nonce:${n}`;
/** the HMAC key every instance on one store shares, drawn once */
const SECRET_KEY = 'siwe-nonce-secret';
/** EIP-4361 nonces are alphanumeric: hex of expiry (12), random (32, 128 bits) and MAC (32) */
const NONCE = /^([0-9a-f]{12})([0-9a-f]{32})([0-9a-f]{32})$/;
/** siwe and viem take seconds to load: loaded on the first sign-in, not at startup */
const libs = async () => ({ ...(await import('siwe')), ...(await import('viem')) });
const NONCES = 'siwe-nonces';
/** index members sort by when the mark may be forgotten (marks of older versions sort the same way) */
const member = (nonce: string, forgetAt: number) => `${String(forgetAt).padStart(15, '0')}:${nonce}`;

export interface Verified {
  address: Address;
  message: SiweMessage;
  /** consume the nonce: commit with the sign-in */
  ops: Op[];
}

export class Siwe {
  private secret: Promise<Buffer> | undefined;

  constructor(
    private store: Store,
    private ttlMs: number,
    /** host[:port] of the service's public URL: a message must name it as its domain */
    private authority: () => string,
  ) {}

  /** A fresh nonce: random, with its expiry and their MAC; nothing is stored. */
  async nonce(): Promise<{ nonce: string; expires_at: string }> {
    const expires = now() + this.ttlMs;
    const body = expires.toString(16).padStart(12, '0') + randomBytes(16).toString('hex');
    return { nonce: body + (await this.mac(body)), expires_at: iso(expires) };
  }

  private async mac(body: string): Promise<string> {
    return createHmac('sha256', await this.key()).update(body).digest('hex').slice(0, 32);
  }

  private key(): Promise<Buffer> {
    this.secret ??= this.loadKey().catch((e) => {
      this.secret = undefined;
      throw e;
    });
    return this.secret;
  }

  /** The shared key, drawn by the first instance that needs it; a lost race reads the winner's. */
  private async loadKey(): Promise<Buffer> {
    for (;;) {
      const cur = await this.store.get<{ hex: string }>(SECRET_KEY);
      if (cur) return Buffer.from(cur.value.hex, 'hex');
      const drawn = randomBytes(32).toString('hex');
      if ((await this.store.commit([{ op: 'put', key: SECRET_KEY, value: { hex: drawn }, expect: 0 }])).ok) return Buffer.from(drawn, 'hex');
    }
  }

  /** The nonce's expiry if this service issued it, else undefined. */
  private async issued(nonce: string): Promise<number | undefined> {
    const m = NONCE.exec(nonce);
    if (!m || !timingSafeEqual(Buffer.from(m[3]), Buffer.from(await this.mac(m[1] + m[2])))) return undefined;
    return parseInt(m[1], 16);
  }

  /** The mark that uses the nonce (must be absent: a second use loses), and a few forgettable marks swept. */
  private async useOps(nonce: string, expires: number, t: number): Promise<Op[]> {
    const old = await this.store.range(NONCES, { lt: String(t).padStart(15, '0'), limit: SWEEP });
    const mark: UsedMark = { nonce, expires_at: expires, used_at: iso(t) };
    return [
      { op: 'put', key: nonceKey(nonce), value: mark, expect: 0 },
      { op: 'index', index: NONCES, member: member(nonce, expires) },
      ...old.flatMap((m): Op[] => [
        { op: 'del', key: nonceKey(m.slice(16)) },
        { op: 'index', index: NONCES, member: m, remove: true },
      ]),
    ];
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
    const expires = await this.issued(msg.nonce);
    if (expires === undefined) throw new AppError('SIWE_NONCE_NOT_FOUND');
    if (await this.store.get(nonceKey(msg.nonce))) throw new AppError('SIWE_NONCE_USED');
    if (expires <= t) throw new AppError('SIWE_NONCE_EXPIRED');
    return { address, message: msg, ops: await this.useOps(msg.nonce, expires, t) };
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
