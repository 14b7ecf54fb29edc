/** Hand-crafted federation calls: a body signed with src/federation/proof.ts, and every way to spoil it. */
import { makeProof, proofHeaders, type Proof } from '../../src/federation/proof.js';
import type { Res } from './client.js';

export interface SignOptions {
  /** the secret the proof is computed with (a wrong one fails) */
  secret: string;
  peerId?: string | null;
  ts?: number;
  nonce?: string;
  /** a body other than the one signed (a tampered body) */
  send?: string;
  /** the X-Federation-Proof header as is (null: none) */
  proofHeader?: string | null;
  /** a proof to send again (a replay) */
  proof?: Proof;
  /** headers sent besides the two federation headers (outside the proof) */
  headers?: Record<string, string>;
}

/** POSTs `body` to `path` with X-Federation-Peer-Id and X-Federation-Proof; answers the status, body and proof sent. */
export async function signedPost(url: string, path: string, body: unknown, o: SignOptions): Promise<Res & { proof: Proof }> {
  const raw = typeof body === 'string' ? body : JSON.stringify(body);
  const proof = o.proof ?? makeProof(o.secret, 'POST', path, raw, o.ts ?? Date.now(), o.nonce);
  const headers: Record<string, string> = { 'content-type': 'application/json', ...o.headers };
  if (o.peerId !== null && o.peerId !== undefined) headers['X-Federation-Peer-Id'] = o.peerId;
  if (o.proofHeader !== null) headers['X-Federation-Proof'] = o.proofHeader ?? JSON.stringify(proof);
  const r = await fetch(url + path, { method: 'POST', headers, body: o.send ?? raw });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : undefined, proof };
}

/** GETs `path` (query string allowed; the proof covers the path without it and an empty body) with the two federation headers. */
export async function signedGet(url: string, path: string, o: { peerId: string; secret: string }): Promise<Res> {
  const r = await fetch(url + path, { headers: proofHeaders(o.peerId, o.secret, 'GET', path.split('?')[0], '', Date.now()) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : undefined };
}
