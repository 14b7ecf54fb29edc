/** The leak check every refusal test shares: no stack trace or internal message ever reaches a client. */
import { expect } from 'vitest';
import { catalogue } from '../../src/errors.js';
import type { Res } from '../helpers/client.js';

/** No stack trace, file path or internal message in any answer; a 5xx says only the catalogue's words. */
export function expectNoLeak(res: Res): void {
  const text = typeof res.body === 'string' ? res.body : JSON.stringify(res.body ?? '');
  expect(text, text).not.toMatch(/\n\s+at |at .*\.(ts|js):\d+|node_modules|\/src\/|TypeError|ReferenceError|SyntaxError: /);
  if (res.status >= 500 && res.body?.error?.code in catalogue) {
    // our envelope: a 5xx says only its catalogue message (src/errors.ts, clientError)
    const code = res.body.error.code as keyof typeof catalogue;
    expect(res.body.error.message, text).toBe(catalogue[code][1]);
    if (code === 'INTERNAL_SERVER_ERROR') expect(res.body.error.details ?? null, text).toBeNull();
  } else if (res.status >= 500 && res.body?.error?.data?.code in catalogue) {
    // JSON-RPC envelopes (/rpc, /a2a) carry the catalogue code in error.data
    const code = res.body.error.data.code as keyof typeof catalogue;
    expect(res.body.error.message, text).toBe(catalogue[code][1]);
  } else if (res.status >= 500) {
    expect.fail(`a ${res.status} without a catalogue code: ${text.slice(0, 300)}`);
  }
}
