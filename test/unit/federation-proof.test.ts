import { describe, expect, it } from 'vitest';
import { makeProof, parseProof, SKEW_MS, verifyProof } from '../../src/federation/proof.js';

// The vector docs/federation.md publishes; its digest and HMAC were computed with `openssl dgst -sha256 [-hmac]`.
const V = {
  secret: 'fed_test_secret_0123456789abcdef',
  method: 'POST',
  path: '/federation/deliver',
  body: '{"signal":{"id":"sig_1"},"hops":0}',
  ts: 1767225600000,
  nonce: '00112233445566778899aabbccddeeff',
  body_sha256: '5eb35b1e6f317efa8f396644492c35d38ea360bf03358cc9a418be26e9b654f6',
  signature: '5c22f8326e690f7df7d82eed27b64ca815bbafdaaedce28e5d5698d3e558d04c',
};

const code = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return (e as { code: string }).code;
  }
  return 'passed';
};

describe('federation proof', () => {
  it('reproduces the published test vector', () => {
    expect(makeProof(V.secret, V.method, V.path, V.body, V.ts, V.nonce)).toEqual({ ts: V.ts, nonce: V.nonce, body_sha256: V.body_sha256, signature: V.signature });
  });

  it('verifies the vector and refuses every alteration with its own code', () => {
    const p = parseProof(JSON.stringify({ ts: V.ts, nonce: V.nonce, body_sha256: V.body_sha256, signature: V.signature }));
    expect(code(() => verifyProof(p, V.secret, V.method, V.path, V.body, V.ts + 1000))).toBe('passed');
    expect(code(() => verifyProof(p, 'other secret', V.method, V.path, V.body, V.ts))).toBe('FED_PROOF_FAILED');
    expect(code(() => verifyProof(p, V.secret, V.method, V.path, V.body + ' ', V.ts))).toBe('FED_PROOF_FAILED');
    expect(code(() => verifyProof(p, V.secret, V.method, '/federation/ack', V.body, V.ts))).toBe('FED_PROOF_FAILED');
    expect(code(() => verifyProof(p, V.secret, V.method, V.path, V.body, V.ts + SKEW_MS + 1))).toBe('FED_PROOF_INVALID');
    expect(code(() => verifyProof(p, V.secret, V.method, V.path, V.body, V.ts - SKEW_MS - 1))).toBe('FED_PROOF_INVALID');
  });

  it('parses only well-formed proofs', () => {
    expect(code(() => parseProof(undefined))).toBe('FED_PROOF_MISSING');
    expect(code(() => parseProof('not json'))).toBe('FED_PROOF_INVALID');
    expect(code(() => parseProof('[]'))).toBe('FED_PROOF_INVALID');
    const ok = { ts: V.ts, nonce: V.nonce, body_sha256: V.body_sha256, signature: V.signature };
    for (const bad of [{ ts: '1' }, { ts: 1.5 }, { nonce: 'abcd' }, { nonce: 'zz'.repeat(16) }, { body_sha256: 'ab' }, { signature: V.signature.toUpperCase() }]) {
      expect(code(() => parseProof(JSON.stringify({ ...ok, ...bad })))).toBe('FED_PROOF_INVALID');
    }
  });
});
