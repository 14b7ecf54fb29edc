// Overview: the live feed (recent past, then pushes), tasks with lease countdowns, inboxes, agent liveness,
// health charts and the actor counts that are not zero.
import { chart, Series } from '../charts.js';
import { badge, newestFirst, signalRow } from './signal-row.js';

const STATES = ['pending', 'delivered', 'leased', 'acked', 'dead_letter'];
const ACTIVE_MS = 5 * 60_000;
const IDLE_MS = 30 * 60_000;
const FEED_MAX = 200;
const POLL_MS = 2000;
// the charts keep their history across visits to the view
const series = new Map();

const seriesOf = (name) => {
  if (!series.has(name)) series.set(name, new Series());
  return series.get(name);
};

function liveness(lastSeen) {
  const age = lastSeen ? Date.now() - Date.parse(lastSeen) : Infinity;
  return age <= ACTIVE_MS ? 'active' : age <= IDLE_MS ? 'idle' : 'disconnected';
}

function layout(h) {
  const panel = (id, title, ...body) => h('section', { class: 'panel', id, 'aria-labelledby': `${id}-h` }, h('h3', { id: `${id}-h` }, ...title), ...body);
  return h('div', { class: 'grid' },
    h('h2', { class: 'view-title' }, 'Overview'),
    panel('feed-panel', ['Live signals ', h('span', { id: 'feed-state', class: 'badge' }, 'connecting')],
      h('div', { class: 'filters' },
        h('label', { class: 'sr-only', htmlFor: 'filter-type' }, 'Types'),
        h('input', { id: 'filter-type', placeholder: 'types (comma list)' }),
        h('label', { class: 'sr-only', htmlFor: 'filter-ring' }, 'Rings'),
        h('input', { id: 'filter-ring', placeholder: 'rings (comma list)' }),
        h('button', { id: 'filter-apply', type: 'button' }, 'Filter')),
      h('ol', { id: 'feed', class: 'rows' })),
    panel('tasks-panel', ['Tasks'], h('ol', { id: 'tasks', class: 'rows' })),
    panel('inbox-panel', ['Inboxes'],
      h('div', { class: 'filters' }, h('select', { id: 'inbox-target', ariaLabel: 'inbox' }), h('button', { id: 'inbox-load', type: 'button' }, 'Show')),
      h('ol', { id: 'inbox', class: 'rows' })),
    panel('agents-panel', ['Agents'], h('div', { id: 'liveness', class: 'counts' }), h('ol', { id: 'agents', class: 'rows' })),
    panel('health-panel', ['Health ', h('span', { id: 'health-state', class: 'badge' })], h('div', { id: 'charts', class: 'charts' })),
    panel('actors-panel', ['Actors'], h('table', { id: 'actors' }, h('caption', { class: 'sr-only' }, 'Actors by kind and state'), h('tbody'))));
}

function render(root, ctx) {
  const { api, h, $, who, fmtTime } = ctx;
  root.append(layout(h));
  const tasks = new Map();
  const timers = [];
  let filters = { types: [], rings: [] };
  let stopped = false;

  const matches = (s) => (!filters.types.length || filters.types.includes(s.signal_type)) && (!filters.rings.length || filters.rings.includes(s.to_ring));

  function drawFeed(signals) {
    $('#feed').replaceChildren(...signals.filter(matches).sort(newestFirst).slice(0, FEED_MAX).map((s) => signalRow(s, ctx)));
  }

  async function openFeed() {
    const list = (v) => v.split(',').map((x) => x.trim()).filter(Boolean);
    filters = { types: list($('#filter-type').value), rings: list($('#filter-ring').value) };
    const q = new URLSearchParams({ limit: '50' });
    if (filters.types.length === 1) q.set('type', filters.types[0]);
    if (filters.rings.length === 1) q.set('to_ring', filters.rings[0]);
    drawFeed((await api(`/signals/list?${q}`)).signals);
  }

  function onSignal(s, type) {
    if (s.signal_type === 'task') { tasks.set(s.id, s); drawTasks(); }
    if (!matches(s)) return;
    const feed = $('#feed');
    const row = feed.querySelector(`li[data-id="${CSS.escape(s.id)}"]`);
    if (row) row.replaceWith(signalRow(s, ctx));
    else if (type === 'signal') feed.prepend(signalRow(s, ctx));
    while (feed.children.length > FEED_MAX) feed.lastChild.remove();
  }

  function drawTasks() {
    const rows = [...tasks.values()].sort(newestFirst).slice(0, 50);
    $('#tasks').replaceChildren(...rows.map((s) => h('li', { 'data-id': s.id },
      h('a', { class: 'type', href: `#/signal/${encodeURIComponent(s.id)}`, 'data-nav': '' }, s.task_status ?? 'task'), badge(s.delivery_state),
      s.claim_expires_at ? h('span', { class: 'countdown', 'data-expires': s.claim_expires_at }) : h('span', { class: 'meta' }, fmtTime(s.created_at)),
      h('span', { class: 'content' }, s.content),
      h('span', { class: 'meta content' }, s.claimed_by ? `claimed by ${who(s.claimed_by)}` : 'unclaimed'))));
    tick();
  }

  function tick() {
    for (const el of root.querySelectorAll('.countdown')) {
      const left = Date.parse(el.dataset.expires) - Date.now();
      el.classList.toggle('expired', left <= 0);
      const s = Math.max(0, Math.ceil(left / 1000));
      el.textContent = left <= 0 ? 'lease over' : `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
    }
  }

  async function loadInboxTargets() {
    const roles = await api('/roles');
    const opts = roles.map((r) => h('option', { value: `/inbox/${encodeURIComponent(r.name)}` }, `role ${r.name}`));
    for (const [id, name] of ctx.names) opts.push(h('option', { value: `/inbox/identity/${encodeURIComponent(id)}` }, `identity ${name}`));
    $('#inbox-target').replaceChildren(...opts);
  }

  async function loadInbox() {
    const path = $('#inbox-target').value;
    if (!path) return;
    try {
      const page = await api(`${path}?limit=50`);
      $('#inbox').replaceChildren(...page.signals.map((s) => signalRow(s, ctx)));
    } catch (e) {
      $('#inbox').replaceChildren(h('li', { class: 'error' }, `${e.code}: ${e.message}`));
    }
  }

  async function poll() {
    const [overview, health, identities] = await Promise.all([
      api('/stats/overview'), fetch('/health').then((r) => r.json()),
      ctx.admin ? api('/identities?limit=100').then((p) => p.identities, () => []) : [],
    ]);
    if (stopped) return;
    $('#health-state').textContent = health.data?.status ?? 'unknown';
    const agents = overview.agent_liveness;
    $('#liveness').replaceChildren(...['total', 'active', 'idle', 'disconnected'].map((k) => h('span', { class: `live-${k}`, 'data-liveness': k }, h('b', {}, String(agents[k])), k)));
    $('#agents').replaceChildren(...identities.filter((i) => i.type === 'agent').map((i) => {
      const l = liveness(i.last_seen);
      return h('li', { 'data-id': i.id }, h('a', { class: 'type', href: `#/agents/${encodeURIComponent(i.id)}`, 'data-nav': '' }, i.name), h('span', { class: `live-${l}` }, l), h('span', { class: 'meta' }, fmtTime(i.last_seen)));
    }));
    seriesOf('signals').push(overview.signal_count);
    for (const s of STATES) seriesOf(s).push(overview.delivery_stats[s] ?? 0);
    seriesOf('active agents').push(agents.active);
    $('#charts').replaceChildren(...[...series].map(([name, s]) => chart(name, s)));
    await loadActors();
  }

  // only the kinds and states that hold actors: the zeros say nothing
  async function loadActors() {
    if (!ctx.admin) return void ($('#actors-panel').hidden = true);
    const data = await api('/admin/actors?limit=1').catch(() => undefined);
    if (!data || stopped) return void ($('#actors-panel').hidden = true);
    const rows = Object.entries(data.counts).flatMap(([kind, byState]) => Object.entries(byState).filter(([, n]) => n > 0)
      .map(([st, n]) => h('tr', {}, h('td', {}, kind), h('td', {}, st), h('td', { class: 'n' }, String(n)))));
    $('#actors tbody').replaceChildren(...(rows.length ? rows : [h('tr', {}, h('td', { colSpan: 3, class: 'muted' }, 'no actors'))]));
  }

  // the next poll starts once the last one is drawn: on an interval, a slow answer could land after a newer one
  function beat() {
    timers.push(setTimeout(() => poll().catch(() => {}).finally(() => { if (!stopped) beat(); }), POLL_MS));
  }

  const offSignal = ctx.live.on('*', (data, type) => { if (type === 'state') $('#feed-state').textContent = data; else onSignal(data, type); });
  $('#feed-state').textContent = ctx.live.state;
  $('#filter-apply').addEventListener('click', () => void openFeed());
  $('#inbox-load').addEventListener('click', () => void loadInbox());
  timers.push(setInterval(tick, 250));

  const ready = Promise.all([
    openFeed(),
    api('/signals/list?type=task&limit=50').then((p) => { for (const s of p.signals) if (!tasks.has(s.id)) tasks.set(s.id, s); drawTasks(); }),
    loadInboxTargets(),
    poll(),
  ]).finally(() => { if (!stopped) beat(); });
  ready.catch(() => {});

  return () => {
    stopped = true;
    offSignal();
    for (const t of timers) { clearTimeout(t); clearInterval(t); }
  };
}

export default { id: 'overview', title: 'Overview', render };
