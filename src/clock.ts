/** The one clock. Machines never read it: the runtime stamps `now` on every event. */
export const now = (): number => Date.now();
/**
 * Monotonic milliseconds for durations inside one process (timeouts, throttles, cache ages, uptime): a wall
 * clock stepped back an hour must not hold them an hour longer. Due times shared with other processes or
 * stored (leases, snoozes, expiries) stay on the wall clock, `now` (docs/reliability.md, Time).
 */
export const elapsed = (): number => performance.now();
export const iso = (ms: number = now()): string => new Date(ms).toISOString();
