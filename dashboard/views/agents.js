// Every identity with its liveness, open sockets and streams (every instance), held leases and reservations,
// keys with their last use, and membership; revoke a key, suspend a membership, force-release a reservation (each asks, each audited).
import { badge } from './signal-row.js';

const ACTIVE_MS = 5 * 60_000;
const IDLE_MS = 30 * 60_000;

function liveness(lastSeen) {
  const age = lastSeen ? Date.now() - Date.parse(lastSeen) : Infinity;
  return age <= ACTIVE_MS ? 'active' : age <= IDLE_MS ? 'idle' : 'disconnected';
}

const groupBy = (items, key) => {
  const m = new Map();
  for (const x of items) m.set(key(x), [...(m.get(key(x)) ?? []), x]);
  return m;
};

// GET /reservations answers one project: the active reservation actors span them all
async function activeReservations(api) {
  const { actors } = await api('/admin/actors?kind=reservation&state=active&limit=100');
  const all = await Promise.all(actors.map((a) => api(`/admin/actors/reservation/${encodeURIComponent(a.id)}`).then((r) => r.context, () => undefined)));
  return all.filter(Boolean);
}

async function load(api) {
  const [identities, keys, connections, leased, reservations, memberships] = await Promise.all([
    api('/identities?limit=100').then((p) => p.identities),
    api('/admin/api-keys'),
    api('/admin/connections').then((d) => d.connections),
    api('/signals/list?delivery_state=leased&limit=100').then((p) => p.signals),
    activeReservations(api),
    api('/org/company/memberships?limit=100').then((p) => p.memberships, () => []),
  ]);
  return {
    identities,
    keys: groupBy(keys, (k) => k.owner),
    connections: groupBy(connections, (c) => c.identity_id),
    leases: groupBy(leased, (s) => s.claimed_by),
    reservations: groupBy(reservations, (r) => r.identity),
    memberships: new Map(memberships.map((m) => [m.identity_id, m])),
  };
}

function card(ctx, d, i, act) {
  const { h } = ctx;
  const l = liveness(i.last_seen);
  const conns = d.connections.get(i.id) ?? [];
  const keys = d.keys.get(i.id) ?? [];
  const leases = d.leases.get(i.id) ?? [];
  const res = d.reservations.get(i.id) ?? [];
  const m = d.memberships.get(i.id);
  const list = (label, items, row) => [h('h4', {}, `${label} (${items.length})`), items.length ? h('ul', { class: 'plain' }, ...items.map(row)) : h('p', { class: 'muted' }, 'none')];
  return h('section', { class: 'panel agent', 'data-id': i.id, 'aria-labelledby': `agent-${i.id}` },
    h('h3', { id: `agent-${i.id}` }, h('a', { href: `#/agents/${encodeURIComponent(i.id)}`, 'data-nav': '' }, i.name), ' ', h('span', { class: `live-${l}`, 'data-liveness': l }, l), ' ', h('span', { class: 'meta' }, i.type)),
    h('p', { class: 'meta' }, `last seen ${ctx.fmtTime(i.last_seen) || 'never'}`),
    m ? h('p', { class: 'membership' }, 'membership ', badge(m.status), ' ',
      m.status === 'active' ? h('button', { type: 'button', class: 'danger suspend', onclick: () => act(`Suspend ${i.name}'s membership? Its keys stop working until it is reactivated.`, `/org/company/memberships/${encodeURIComponent(m.id)}/status`, 'PATCH', { status: 'suspended' }) }, 'Suspend membership')
        : m.status === 'suspended' ? h('button', { type: 'button', class: 'reactivate', onclick: () => act(`Reactivate ${i.name}'s membership?`, `/org/company/memberships/${encodeURIComponent(m.id)}/status`, 'PATCH', { status: 'active' }) }, 'Reactivate') : '') : '',
    ...list('Connections', conns, (c) => h('li', { 'data-transport': c.transport }, `${c.transport} since ${ctx.fmtTime(c.opened_at)}`, h('span', { class: 'meta' }, ` key ${c.key_id}`))),
    ...list('Leases', leases, (s) => h('li', { 'data-signal': s.id }, h('a', { href: `#/signal/${encodeURIComponent(s.id)}` }, s.content), h('span', { class: 'meta' }, ` until ${ctx.fmtTime(s.claim_expires_at)}`))),
    ...list('Reservations', res, (r) => h('li', { 'data-reservation': r.id }, `${r.project}:${r.path} `, h('span', { class: 'meta' }, `until ${ctx.fmtTime(r.expires_at)} `),
      h('button', { type: 'button', class: 'danger force-release', onclick: () => act(`Force-release ${r.path} held by ${i.name}?`, `/reservations/${encodeURIComponent(r.id)}/force-release`, 'POST') }, 'Force-release'))),
    ...list('Keys', keys, (k) => h('li', { 'data-key': k.id }, h('code', {}, k.id), ' ', k.revoked ? badge('revoked') : badge('live'), ' ',
      h('span', { class: 'meta' }, `${scopes(k)} · created ${ctx.fmtTime(k.created_at)} · `, h('span', { 'data-last-used': k.last_used_at ?? '' }, `last used ${ctx.fmtTime(k.last_used_at) || 'never'}`), conns.some((c) => c.key_id === k.id) ? ' · in use now' : ''), ' ',
      k.revoked ? '' : h('button', { type: 'button', class: 'danger revoke', onclick: () => act(`Revoke key ${k.id} of ${i.name}? Its sockets close and every call with it fails.`, `/admin/api-keys/${encodeURIComponent(k.id)}/revoke`, 'POST') }, 'Revoke'))));
}

function scopes(k) {
  const perms = Object.entries(k.permissions ?? {}).filter(([, v]) => v?.length).map(([p, v]) => `${p}: ${v.join(', ')}`);
  return `${perms.join(' · ') || 'all permissions'}${k.ring_scopes?.length ? ` · ring scopes ${k.ring_scopes.join(', ')}` : ''}`;
}

async function render(root, ctx, id) {
  const { h, api } = ctx;
  if (!ctx.admin) {
    root.append(h('h2', {}, 'Agents'), h('p', { class: 'muted' }, 'The agents view needs an admin key.'));
    return;
  }
  const status = h('p', { role: 'status', id: 'agents-status' });
  const body = h('div', { class: 'grid' });
  root.append(h('h2', {}, id ? h('a', { href: '#/agents' }, 'Agents') : 'Agents', id ? ` · ${ctx.who(id)}` : ''), status, body);

  async function act(question, path, method, payload) {
    if (!(await ctx.confirm(question))) return;
    try {
      await api(path, { method, body: payload });
      status.className = 'ok';
      status.textContent = 'Done.';
    } catch (e) {
      status.className = 'error';
      status.textContent = `${e.code}: ${e.message}`;
    }
    await draw();
  }

  // a draw still in flight when the operator has moved on must not paint over the next view
  let stopped = false;
  async function draw() {
    const d = await load(api);
    if (stopped) return;
    const shown = d.identities.filter((i) => !id || i.id === id);
    body.replaceChildren(...shown.map((i) => card(ctx, d, i, act)));
  }

  await draw();
  // leases change with signals: redraw on a burst of them at most every second
  let again;
  const off = ctx.live.on('*', (s, type) => {
    if (type === 'state') return;
    again ??= setTimeout(() => { again = undefined; draw().catch(() => {}); }, 1000);
  });
  const poll = setInterval(() => draw().catch(() => {}), 5000);
  return () => { stopped = true; off(); clearTimeout(again); clearInterval(poll); };
}

export default { id: 'agents', title: 'Agents', render };
