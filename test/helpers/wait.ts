/** The one bounded wait every test uses: poll for an eventual state instead of sleeping a fixed time. */

/**
 * Polls `probe` every `stepMs` until `done` holds, for at most `timeoutMs`; fails naming what it waited for
 * and what was last seen. Returns the value that satisfied `done`.
 */
export async function waitFor<T>(what: string | (() => string), probe: () => T | Promise<T>, done: (v: T) => boolean, timeoutMs = 5000, stepMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const last = await probe();
    if (done(last)) return last;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}; last seen: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
