/**
 * GET /discovery: this instance's directory as the caller may see it. Identities show their public
 * fields only; peers show to members only when active, and in full to admins.
 */
import Type from 'typebox';
import { AppError } from '../errors.js';
import { keys, type Company, type Identity, type Principal } from '../identity/model.js';
import { commaList, compile, validateQuery } from '../validation.js';
import type { Store } from '../store/port.js';
import { scanDesc } from '../store/scan.js';
import { indexes as identityIndexes } from '../identity/model.js';
import type { Org } from './service.js';
import type { Peers } from './peers.js';

export const DISCOVERY_LIMIT = { default: 100, max: 500 };

const Filter = Type.String({ minLength: 1, maxLength: 200 });
const DiscoveryQuery = compile(
  Type.Object(
    {
      capability: Type.Optional(Filter),
      role: Type.Optional(Filter),
      type: Type.Optional(Type.Union([Type.Literal('human'), Type.Literal('agent')])),
      limit: Type.Optional(Type.Integer({ minimum: 1, maximum: DISCOVERY_LIMIT.max })),
      cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    },
    { additionalProperties: false },
  ),
);
export type DiscoveryFilters = { capability?: string; role?: string; type?: 'human' | 'agent' };

const publicIdentity = (i: Identity) => ({ id: i.id, name: i.name, type: i.type, capabilities: i.capabilities, tags: i.tags, wallet_address: i.wallet_address, agent_8004_id: i.agent_8004_id });

/** The cursor is the last identity id handed out, base64url; anything else is not one this service issued. */
const encodeCursor = (id: string) => Buffer.from(id, 'utf8').toString('base64url');
function decodeCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!id || encodeCursor(id) !== cursor) throw new AppError('DISC_VALIDATION_FAILED', 'cursor is not a cursor this service issued', { field: 'cursor', reason: 'cursor' });
  return id;
}

export class Discovery {
  constructor(
    private store: Store,
    private org: Org,
    private peers: Peers,
    private baseUrl: () => string,
  ) {}

  /**
   * One page of identities (newest first, `limit` default 100, max 500) from a range read of the identities
   * index; a filtered page reads on through the index until it is full, up to the scan cap (scanLimits).
   */
  async directory(p: Principal, raw: Record<string, string>) {
    const { limit, cursor, ...f } = validateQuery(DiscoveryQuery, raw, 'DISC_VALIDATION_FAILED');
    const before = decodeCursor(cursor);
    const [company, roles, rings, peers] = await Promise.all([
      this.store.get<Company>(keys.company),
      this.org.listRoles(),
      this.org.listRings(),
      this.peers.list(p.identity.is_admin ? undefined : 'active'),
    ]);
    const wanted = commaList(f.capability) ?? [];
    const role = f.role ? roles.find((r) => r.id === f.role || r.name.toLowerCase() === f.role!.toLowerCase()) : undefined;
    const fillers = f.role ? new Set(role ? await this.org.fillersOf(role.id) : []) : undefined;
    const keep = (i: Identity) => (!f.type || i.type === f.type) && wanted.every((c) => i.capabilities.includes(c)) && (!fillers || fillers.has(i.id));
    const page = await scanDesc<Identity>(this.store, [identityIndexes.identities], {
      before,
      limit: limit ?? DISCOVERY_LIMIT.default,
      load: async (ids) => (await this.store.getMany<Identity>(ids.map(keys.identity))).map((r) => r?.value),
      keep,
    });
    const shown = page.items;
    const base = this.baseUrl();
    return {
      org: company ? { id: company.value.id, name: company.value.name } : null,
      roles: roles.map((r) => ({ id: r.id, name: r.name, purpose: r.purpose, domains: r.domains })),
      rings: rings.map((r) => ({ id: r.id, name: r.name, purpose: r.purpose })),
      identities: shown.map(publicIdentity),
      capabilities: [...new Set(shown.flatMap((i) => i.capabilities))].sort(),
      agent_card_url: `${base}/.well-known/agent-card.json`,
      endpoints: { rest: base, websocket: base.replace(/^http/, 'ws') + '/ws', sse: `${base}/signals/stream`, mcp: `${base}/mcp`, a2a: `${base}/a2a` },
      peers: p.identity.is_admin ? peers : peers.map((x) => ({ id: x.id, name: x.name, endpoint: x.endpoint, status: x.status })),
      filters: f as DiscoveryFilters,
      cursor: page.cursor === null ? null : encodeCursor(page.cursor),
      has_more: page.cursor !== null,
    };
  }
}
