// The operator dashboard: plain ES modules, no build step. Every view reads the public REST routes and
// the SSE stream with the API key the operator signed in with.
import { api, session, stream } from './api.js';
import { chart, Series } from './charts.js';
import { $, h } from './dom.js';

const STATES = ['pending', 'delivered', 'leased', 'acked', 'dead_letter'];
const ACTIVE_MS = 5 * 60_000;
const IDLE_MS = 30 * 60_000;
const FEED_MAX = 200;
const POLL_MS = 2000;

const state = { admin: false, names: new Map(), tasks: new Map(), feed: undefined, timers: [], series: new Map() };

const fmtTime = (iso) => (iso ? new Date(iso).toLocaleTimeString() : '');
const who = (id) => (id ? state.names.get(id) ?? id : '–');
const badge = (s) => h('span', { class: `badge state-${s}` }, s);

function signalRow(s) {
  const to = s.to_identity ? who(s.to_identity) : s.to_role ? `role ${s.to_role}` : s.to_ring ? `ring ${s.to_ring}` : 'everyone';
  return h('li', { 'data-id': s.id, 'data-type': s.signal_type },
    h('span', { class: 'type' }, s.signal_type), badge(s.delivery_state), h('span', { class: 'meta' }, fmtTime(s.created_at)),
    h('span', { class: 'content' }, s.content),
    h('span', { class: 'meta content' }, `${who(s.from_identity)} → ${to}`));
}

// ---- live feed ----
function openFeed() {
  state.feed?.close();
  const feed = $('#feed');
  feed.replaceChildren();
  const filters = { types: $('#filter-type').value.trim(), rings: $('#filter-ring').value.trim() };
  state.feed = stream(filters, (s, type) => {
    const row = feed.querySelector(`li[data-id="${CSS.escape(s.id)}"]`);
    if (row) row.replaceWith(signalRow(s));
    else if (type === 'signal') feed.prepend(signalRow(s));
    while (feed.children.length > FEED_MAX) feed.lastChild.remove();
  }, (st) => { $('#feed-state').textContent = st; });
}

// tasks follow every task change, whatever the feed's filters: their stream stays open when the filters
// change, so a task changed while the feed reconnects is not missed
function followTasks() {
  stream({ types: 'task' }, (s) => { state.tasks.set(s.id, s); renderTasks(); }, () => {});
}

// ---- tasks with a live lease countdown ----
async function loadTasks() {
  const page = await api('/signals/list?type=task&limit=50');
  for (const s of page.signals) state.tasks.set(s.id, s);
  renderTasks();
}

function renderTasks() {
  const rows = [...state.tasks.values()].sort((a, b) => (a.id < b.id ? 1 : -1)).slice(0, 50);
  $('#tasks').replaceChildren(...rows.map((s) => h('li', { 'data-id': s.id },
    h('span', { class: 'type' }, s.task_status ?? 'task'), badge(s.delivery_state),
    s.claim_expires_at ? h('span', { class: 'countdown', 'data-expires': s.claim_expires_at }) : h('span', { class: 'meta' }, fmtTime(s.created_at)),
    h('span', { class: 'content' }, s.content),
    h('span', { class: 'meta content' }, s.claimed_by ? `claimed by ${who(s.claimed_by)}` : 'unclaimed'))));
  tick();
}

function tick() {
  for (const el of document.querySelectorAll('.countdown')) {
    const left = Date.parse(el.dataset.expires) - Date.now();
    el.classList.toggle('expired', left <= 0);
    const s = Math.max(0, Math.ceil(left / 1000));
    el.textContent = left <= 0 ? 'lease over' : `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
  }
}

// ---- inboxes per role and identity ----
async function loadInboxTargets() {
  const roles = await api('/roles');
  const opts = roles.map((r) => h('option', { value: `/inbox/${encodeURIComponent(r.name)}` }, `role ${r.name}`));
  for (const [id, name] of state.names) opts.push(h('option', { value: `/inbox/identity/${encodeURIComponent(id)}` }, `identity ${name}`));
  $('#inbox-target').replaceChildren(...opts);
}

async function loadInbox() {
  const path = $('#inbox-target').value;
  if (!path) return;
  try {
    const page = await api(`${path}?limit=50`);
    $('#inbox').replaceChildren(...page.signals.map(signalRow));
  } catch (e) {
    $('#inbox').replaceChildren(h('li', { class: 'error' }, `${e.code}: ${e.message}`));
  }
}

// ---- agents and health ----
async function loadNames() {
  if (!state.admin) return [];
  const page = await api('/identities?limit=100');
  for (const i of page.identities) state.names.set(i.id, i.name);
  return page.identities;
}

function liveness(lastSeen) {
  const age = lastSeen ? Date.now() - Date.parse(lastSeen) : Infinity;
  return age <= ACTIVE_MS ? 'active' : age <= IDLE_MS ? 'idle' : 'disconnected';
}

function seriesOf(name) {
  if (!state.series.has(name)) state.series.set(name, new Series());
  return state.series.get(name);
}

async function poll() {
  const [overview, health, identities] = await Promise.all([api('/stats/overview'), fetch('/health').then((r) => r.json()), loadNames().catch(() => [])]);
  $('#health-state').textContent = health.data?.status ?? 'unknown';
  const agents = overview.agent_liveness;
  $('#liveness').replaceChildren(...['total', 'active', 'idle', 'disconnected'].map((k) => h('span', { class: `live-${k}`, 'data-liveness': k }, h('b', {}, String(agents[k])), k)));
  $('#agents').replaceChildren(...identities.filter((i) => i.type === 'agent').map((i) => {
    const l = liveness(i.last_seen);
    return h('li', { 'data-id': i.id }, h('span', { class: 'type' }, i.name), h('span', { class: `live-${l}` }, l), h('span', { class: 'meta' }, fmtTime(i.last_seen)));
  }));
  seriesOf('signals').push(overview.signal_count);
  for (const s of STATES) seriesOf(s).push(overview.delivery_stats[s] ?? 0);
  seriesOf('active agents').push(agents.active);
  $('#charts').replaceChildren(...[...state.series].map(([name, s]) => chart(name, s)));
  await loadActors();
}

async function loadActors() {
  if (!state.admin) return void ($('#actors-panel').hidden = true);
  try {
    const data = await api('/admin/actors?limit=1');
    const rows = Object.entries(data.counts).flatMap(([kind, byState]) => Object.entries(byState).map(([st, n]) => h('tr', {}, h('td', {}, kind), h('td', {}, st), h('td', { class: 'n' }, String(n)))));
    $('#actors tbody').replaceChildren(...rows);
  } catch {
    $('#actors-panel').hidden = true;
  }
}

// ---- sign in ----
async function showBoard() {
  $('#signin').hidden = true;
  $('#board').hidden = false;
  $('#signout').hidden = false;
  state.admin = await api('/admin/health-metrics').then(() => true, () => false);
  $('#whoami').textContent = state.admin ? 'admin' : 'member';
  await loadNames().catch(() => {});
  openFeed();
  followTasks();
  await Promise.all([loadTasks(), loadInboxTargets(), poll()]);
  state.timers.push(setInterval(tick, 250));
  beat();
}

// the next poll starts once the last one is drawn: on an interval, a slow answer could land after a newer one
function beat() {
  setTimeout(() => poll().catch(() => {}).finally(beat), POLL_MS);
}

function showSignIn(message = '') {
  $('#board').hidden = true;
  $('#signout').hidden = true;
  $('#signin').hidden = false;
  $('#signin-error').textContent = message;
}

$('#signin').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  session.set($('#key').value.trim());
  try {
    await api('/stats/overview');
  } catch (e) {
    session.clear();
    return showSignIn(`${e.code}: ${e.message}`);
  }
  $('#key').value = '';
  await showBoard();
});
$('#signout').addEventListener('click', () => {
  session.clear();
  location.reload();
});
$('#filter-apply').addEventListener('click', openFeed);
$('#inbox-load').addEventListener('click', loadInbox);

if (session.key) showBoard().catch((e) => { session.clear(); showSignIn(`${e.code ?? 'ERROR'}: ${e.message}`); });
else showSignIn();
