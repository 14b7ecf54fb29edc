// The operator console's shell: sign-in, nav, the hash router (#/<view>/<id>), keyboard navigation, one
// shared SSE connection, and the ctx every view renders with (see docs/operators.md, "Console").
import { api, session, stream } from './api.js';
import { $, h } from './dom.js';
import views from './views/index.js';

const names = new Map();
const listeners = new Map();
const shell = { admin: false, es: undefined, cleanup: undefined, rendering: 0 };

const fmtTime = (iso) => (iso ? new Date(iso).toLocaleString() : '');
const who = (id) => (id ? names.get(id) ?? id : '–');

const live = {
  state: 'offline',
  on(type, fn) {
    if (!listeners.has(type)) listeners.set(type, new Set());
    listeners.get(type).add(fn);
    return () => listeners.get(type).delete(fn);
  },
};

function publish(type, data) {
  for (const key of [type, '*']) for (const fn of listeners.get(key) ?? []) {
    try { fn(data, type); } catch (e) { console.error(e); }
  }
}

// events keep their order: one naming an identity not yet known waits for the names to reload first
let pending = Promise.resolve();
function onEvent(type, signal) {
  const unknown = shell.admin && [signal.from_identity, signal.to_identity, signal.claimed_by].some((id) => id && !names.has(id));
  pending = pending.then(() => (unknown ? loadNames().catch(() => {}) : undefined)).then(() => publish(type, signal));
}

function setLive(st) {
  live.state = st;
  $('#live-state').textContent = st;
  publish('state', st);
}

/** An accessible modal: resolves true only on Confirm; Escape and Cancel resolve false. */
function confirm(message) {
  const dialog = $('#confirm');
  $('#confirm-message').textContent = message;
  dialog.returnValue = '';
  dialog.showModal();
  $('#confirm-ok').focus();
  return new Promise((resolve) => dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true }));
}

const navigate = (hash) => { location.hash = hash; };

async function loadNames() {
  if (!shell.admin) return;
  // pages of 100 (the most one page holds), bounded: a console of thousands of identities names the first ones
  let after;
  for (let n = 0; n < 10; n++) {
    const page = await api(`/identities?limit=100${after ? `&after=${encodeURIComponent(after)}` : ''}`);
    for (const i of page.identities) names.set(i.id, i.name);
    if (!page.has_more) break;
    after = page.cursor;
  }
}

const ctx = { api, live, navigate, confirm, h, $, fmtTime, who, names, get admin() { return shell.admin; }, loadNames };

function route() {
  const [id, ...rest] = location.hash.replace(/^#\/?/, '').split('/');
  const view = views.find((v) => v.id === id) ?? views[0];
  return { view, param: rest.length ? decodeURIComponent(rest.join('/')) : undefined };
}

async function render() {
  if (!session.key) return;
  const { view, param } = route();
  const turn = ++shell.rendering;
  shell.cleanup?.();
  shell.cleanup = undefined;
  markCurrent(view.id);
  const root = $('#view');
  root.replaceChildren();
  root.dataset.view = view.id;
  document.title = `${view.title} · Agent coordination`;
  try {
    const cleanup = await view.render(root, ctx, param);
    if (turn !== shell.rendering) cleanup?.();
    else shell.cleanup = cleanup;
  } catch (e) {
    root.append(h('p', { class: 'error', role: 'alert' }, `${e.code ?? 'ERROR'}: ${e.message}`));
  }
}

function markCurrent(id) {
  for (const a of document.querySelectorAll('#nav a')) if (a.dataset.view === id) a.setAttribute('aria-current', 'page');
  else a.removeAttribute('aria-current');
}

// views with `nav: false` open only from a link (a signal's detail)
const navViews = () => views.filter((v) => v.nav !== false);

function drawNav() {
  $('#nav').replaceChildren(...navViews().map((v, i) => h('a', { href: `#/${v.id}`, 'data-view': v.id, title: `${v.title} (${i + 1})` }, v.title)));
}

/** Keys when not typing: 1–9 open the nth view, `/` opens search, j/k move between rows, Escape returns focus to the view. */
function onKey(ev) {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(ev.target.tagName) || ev.target.isContentEditable;
  if (typing || ev.ctrlKey || ev.metaKey || ev.altKey || !session.key || $('#confirm').open) return;
  const n = Number(ev.key);
  if (n >= 1 && n <= navViews().length) return void navigate(`#/${navViews()[n - 1].id}`);
  if (ev.key === '/') {
    ev.preventDefault();
    if (views.some((v) => v.id === 'search')) navigate('#/search');
    return void requestAnimationFrame(() => $('#view input[type=search]')?.focus());
  }
  if (ev.key === 'j' || ev.key === 'k') {
    const rows = [...document.querySelectorAll('#view [data-nav]')];
    if (!rows.length) return;
    const at = rows.indexOf(document.activeElement);
    const next = rows[Math.min(rows.length - 1, Math.max(0, at + (ev.key === 'j' ? 1 : -1)))];
    next.focus();
  }
}

async function showConsole() {
  $('#signin').hidden = true;
  $('#view').hidden = false;
  $('#nav').hidden = false;
  $('#signout').hidden = false;
  shell.admin = await api('/admin/health-metrics').then(() => true, () => false);
  $('#whoami').textContent = shell.admin ? 'admin' : 'member';
  await loadNames().catch(() => {});
  drawNav();
  shell.es = stream(onEvent, setLive);
  await render();
}

function showSignIn(message = '') {
  $('#view').hidden = true;
  $('#nav').hidden = true;
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
  await showConsole();
});
$('#signout').addEventListener('click', () => {
  session.clear();
  location.reload();
});
addEventListener('hashchange', () => void render());
addEventListener('keydown', onKey);

if (session.key) showConsole().catch((e) => { session.clear(); showSignIn(`${e.code ?? 'ERROR'}: ${e.message}`); });
else showSignIn();
