/** Real wallets for identity tests: viem accounts signing EIP-4361 (SIWE) messages built with `siwe`. */
import { SiweMessage } from 'siwe';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Client } from './client.js';

export const newWallet = (): PrivateKeyAccount => privateKeyToAccount(generatePrivateKey());

export interface MessageOptions {
  domain?: string;
  nonce: string;
  expirationTime?: string;
  notBefore?: string;
}

/** The authority a server started by the test helpers answers to (BASE_URL unset: localhost and its port). */
export const authorityOf = (url: string) => `localhost:${new URL(url).port}`;

export function siweText(url: string, address: string, o: MessageOptions): string {
  return new SiweMessage({
    domain: o.domain ?? authorityOf(url),
    address,
    statement: 'Sign in to the coordination service',
    uri: `http://${authorityOf(url)}`,
    version: '1',
    chainId: 1,
    nonce: o.nonce,
    issuedAt: new Date().toISOString(),
    expirationTime: o.expirationTime,
    notBefore: o.notBefore,
  }).prepareMessage();
}

export async function nonceOf(anon: Client): Promise<string> {
  const r = await anon.get('/auth/nonce');
  if (r.status !== 200) throw new Error(`nonce failed: ${JSON.stringify(r.body)}`);
  return r.body.data.nonce;
}

/** A signed SIWE message with a fresh nonce from the server: the body of a login or a wallet proof. */
export async function signed(anon: Client, wallet: PrivateKeyAccount, o: Partial<MessageOptions> = {}): Promise<{ message: string; signature: string }> {
  const message = siweText(anon.url, wallet.address, { nonce: o.nonce ?? (await nonceOf(anon)), ...o });
  return { message, signature: await wallet.signMessage({ message }) };
}

/** `{wallet_address, message, signature}` for POST /invite, /auth/attach-wallet and /auth-request. */
export async function walletProof(anon: Client, wallet: PrivateKeyAccount, o: Partial<MessageOptions> = {}) {
  return { wallet_address: wallet.address, ...(await signed(anon, wallet, o)) };
}
