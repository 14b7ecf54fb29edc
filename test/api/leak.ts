/** The leak check every refusal test shares: no stack trace or internal message ever reaches a client. */
import { expect } from 'vitest';
import { catalogue } from '../../src/errors.js';
import type { Res } from '../helpers/client.js';

/** No stack trace, file path or internal message in any answer; a 500 says only the catalogue's words. */
export function expectNoLeak(res: Res): void {
  const text = typeof res.body === 'string' ? res.body : JSON.stringify(res.body ?? '');
  expect(text, text).not.toMatch(/\n\s+at |at .*\.(ts|js):\d+|node_modules|\/src\/|TypeError|ReferenceError|SyntaxError: /);
  if (res.status >= 500 && res.body?.error) {
    const code = res.body.error.code as keyof typeof catalogue;
    expect(catalogue[code], `unknown code ${code}`).toBeDefined();
    if (code === 'INTERNAL_SERVER_ERROR') expect(res.body.error.message).toBe(catalogue[code][1]);
  }
}
