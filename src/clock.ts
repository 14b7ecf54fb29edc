/** The one clock. Machines never read it: the runtime stamps `now` on every event. */
export const now = (): number => Date.now();
export const iso = (ms: number = now()): string => new Date(ms).toISOString();
