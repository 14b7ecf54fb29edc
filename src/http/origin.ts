/**
 * The browser origins a request may come from: this service's own (BASE_URL's, settled once the port is
 * bound) and ALLOWED_ORIGINS. A request without an Origin header is not a browser's and passes.
 */
import { AppError } from '../errors.js';
import type { Links } from './links.js';

const LOOPBACK = ['localhost', '127.0.0.1', '[::1]'];

export class Origins {
  private memo: [string, string[]] = ['', []];

  constructor(
    private links: Links,
    private allowed: readonly string[],
  ) {}

  /** Throws ORIGIN_NOT_ALLOWED for an Origin header (`null` included) that is neither ours nor allowed. */
  check(origin: string | undefined): void {
    if (origin === undefined || origin === '' || this.own().includes(origin) || this.allowed.includes(origin)) return;
    throw new AppError('ORIGIN_NOT_ALLOWED', 'This Origin may not call the service: only BASE_URL and ALLOWED_ORIGINS may', { origin: origin.slice(0, 200) });
  }

  /** BASE_URL's origin; on a loopback name, every loopback spelling of it (what a local browser may type). */
  private own(): string[] {
    if (this.memo[0] === this.links.baseUrl) return this.memo[1];
    const u = new URL(this.links.baseUrl);
    const own = LOOPBACK.includes(u.hostname) ? LOOPBACK.map((h) => `${u.protocol}//${h}${u.port ? `:${u.port}` : ''}`) : [u.origin];
    this.memo = [this.links.baseUrl, own];
    return own;
  }
}
