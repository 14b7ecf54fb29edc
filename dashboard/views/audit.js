// Audit log: every admin write, newest first, filtered by actor, action and a time window; pages on with
// "Older", and the newest page follows new entries while it is open.
import { errorText, follow, query, table } from './kit.js';

const POLL_MS = 3000;
const PAGE = 50;
const ACTIONS = ['api_key.revoke', 'api_key.create', 'api_key.rotate', 'actor.event', 'task.retry', 'reservation.force_release', 'identity.update', 'identity.delete', 'invite.create', 'invite.redeem', 'membership.suspend'];

const isoOf = (local) => (local ? new Date(local).toISOString() : undefined);

function entryRow(ctx, e) {
  const { h, who, fmtTime } = ctx;
  return h('tr', { 'data-id': e.id, 'data-action': e.action },
    h('td', {}, fmtTime(e.at)), h('td', {}, e.actor ? who(e.actor) : 'anonymous'), h('td', {}, e.action), h('td', {}, e.target ?? '–'),
    h('td', { class: 'details' }, e.details ? JSON.stringify(e.details) : ''));
}

async function render(root, ctx) {
  const { api, h, $, names } = ctx;
  const action = h('input', { id: 'audit-action', autocomplete: 'off' });
  action.setAttribute('list', 'audit-actions');
  const actors = [...(names ?? new Map())].map(([id, name]) => h('option', { value: id }, name));
  root.append(h('h2', { class: 'view-title' }, 'Audit log'),
    h('section', { class: 'panel', 'aria-labelledby': 'audit-h' },
      h('h3', { id: 'audit-h' }, 'Entries'),
      h('form', { id: 'audit-filters', class: 'filters' },
        h('label', { htmlFor: 'audit-actor' }, 'Actor'), h('select', { id: 'audit-actor' }, h('option', { value: '' }, 'anyone'), ...actors),
        h('label', { htmlFor: 'audit-action' }, 'Action'), action,
        h('datalist', { id: 'audit-actions' }, ...ACTIONS.map((a) => h('option', { value: a }))),
        h('label', { htmlFor: 'audit-since' }, 'From'), h('input', { id: 'audit-since', type: 'datetime-local' }),
        h('label', { htmlFor: 'audit-until' }, 'To'), h('input', { id: 'audit-until', type: 'datetime-local' }),
        h('button', { type: 'submit' }, 'Filter')),
      h('div', { id: 'audit-entries' }),
      h('button', { type: 'button', id: 'audit-older', class: 'secondary', hidden: true }, 'Older')));
  const state = { cursor: null, rows: [] };
  const filters = () => ({ actor: $('#audit-actor').value, action: $('#audit-action').value.trim(), since: isoOf($('#audit-since').value), until: isoOf($('#audit-until').value) });
  const draw = () => $('#audit-entries').replaceChildren(state.rows.length
    ? table(h, 'Audit entries, newest first', ['At', 'Actor', 'Action', 'Target', 'Details'], state.rows.map((e) => entryRow(ctx, e)), { id: 'audit-table' })
    : h('p', { class: 'muted' }, 'No entries match.'));
  async function load(after) {
    const page = await api(`/admin/audit?${query({ ...filters(), limit: PAGE, after })}`);
    state.rows = after ? [...state.rows, ...page.entries] : page.entries;
    state.cursor = page.has_more ? page.cursor : null;
    $('#audit-older').hidden = !state.cursor;
    draw();
  }
  const safe = (p) => p.catch((e) => $('#audit-entries').replaceChildren(errorText(h, e)));
  $('#audit-filters').addEventListener('submit', (ev) => { ev.preventDefault(); safe(load()); });
  $('#audit-older').addEventListener('click', () => safe(load(state.cursor)));
  await safe(load());
  // only the first page follows: a reader paging back keeps the rows they are reading
  return follow(ctx, ['*'], () => (state.rows.length > PAGE ? Promise.resolve() : load()), { ms: 500, pollMs: POLL_MS });
}

export default { id: 'audit', title: 'Audit log', render };
