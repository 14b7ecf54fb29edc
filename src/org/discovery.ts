/**
 * GET /discovery: this instance's directory as the caller may see it. Identities show their public
 * fields only; peers show to members only when active, and in full to admins.
 */
import Type from 'typebox';
import { keys, type Company, type Identity, type Principal } from '../identity/model.js';
import { commaList, compile, validate } from '../validation.js';
import type { Store } from '../store/port.js';
import { loadAll } from '../store/scan.js';
import { indexes as identityIndexes } from '../identity/model.js';
import type { Org } from './service.js';
import type { Peers } from './peers.js';

const Filter = Type.String({ minLength: 1, maxLength: 200 });
const DiscoveryQuery = compile(
  Type.Object({ capability: Type.Optional(Filter), role: Type.Optional(Filter), type: Type.Optional(Type.Union([Type.Literal('human'), Type.Literal('agent')])) }, { additionalProperties: false }),
);
export type DiscoveryFilters = { capability?: string; role?: string; type?: 'human' | 'agent' };

const publicIdentity = (i: Identity) => ({ id: i.id, name: i.name, type: i.type, capabilities: i.capabilities, tags: i.tags, wallet_address: i.wallet_address, agent_8004_id: i.agent_8004_id });

export class Discovery {
  constructor(
    private store: Store,
    private org: Org,
    private peers: Peers,
    private baseUrl: () => string,
  ) {}

  async directory(p: Principal, raw: Record<string, string>) {
    const f = validate(DiscoveryQuery, raw, 'DISC_VALIDATION_FAILED') as DiscoveryFilters;
    const [company, roles, rings, identities, peers] = await Promise.all([
      this.store.get<Company>(keys.company),
      this.org.listRoles(),
      this.org.listRings(),
      loadAll<Identity>(this.store, identityIndexes.identities, keys.identity),
      this.peers.list(p.identity.is_admin ? undefined : 'active'),
    ]);
    let shown = identities;
    if (f.type) shown = shown.filter((i) => i.type === f.type);
    const wanted = commaList(f.capability) ?? [];
    if (wanted.length) shown = shown.filter((i) => wanted.every((c) => i.capabilities.includes(c)));
    if (f.role) {
      const role = roles.find((r) => r.id === f.role || r.name.toLowerCase() === f.role!.toLowerCase());
      const fillers = new Set(role ? await this.org.fillersOf(role.id) : []);
      shown = shown.filter((i) => fillers.has(i.id));
    }
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
      filters: f,
    };
  }
}
