// One signal or task: its fields, thread, receipts, the actor's state with transitions and pending timers,
// dependencies, federation status and webhook deliveries; admin actions each ask first and are audited.
import { badge, signalRow } from './signal-row.js';

const SHOWN = ['id', 'signal_type', 'content', 'from_identity', 'to_identity', 'to_role', 'to_ring', 'task_status', 'delivery_state', 'claimed_by', 'claim_expires_at', 'not_before', 'ack_due_at', 'deadline', 'delivery_count', 'max_attempts', 'dead_letter_reason', 'depends_on', 'created_at'];
const IDENTITY_FIELDS = new Set(['from_identity', 'to_identity', 'claimed_by']);

function fields(h, ctx, c) {
  const rows = SHOWN.filter((k) => c[k] !== undefined && c[k] !== null && !(Array.isArray(c[k]) && !c[k].length)).flatMap((k) => {
    const v = Array.isArray(c[k]) ? c[k].join(', ') : IDENTITY_FIELDS.has(k) ? ctx.who(c[k]) : String(c[k]);
    return [h('dt', {}, k), h('dd', { 'data-field': k }, v)];
  });
  return h('dl', { class: 'fields' }, ...rows);
}

function section(h, id, title, ...body) {
  return h('section', { class: 'panel', id, 'aria-labelledby': `${id}-h` }, h('h3', { id: `${id}-h` }, title), ...body);
}

const empty = (h, text) => h('p', { class: 'muted' }, text);

async function deliveriesOf(api, id) {
  const hooks = await api('/admin/webhooks').catch(() => []);
  const pages = await Promise.all(hooks.map((w) => api(`/admin/webhooks/${encodeURIComponent(w.id)}/deliveries?limit=50`).then((p) => p.deliveries.map((d) => ({ ...d, url: w.url })), () => [])));
  return pages.flat().filter((d) => JSON.stringify(d.payload ?? d).includes(id));
}

async function render(root, ctx, id) {
  const { api, h } = ctx;
  if (!id) {
    root.append(h('h2', {}, 'Signal'), empty(h, 'Open a signal from the overview, search or agents view.'));
    return;
  }
  const status = h('p', { class: 'error', role: 'status', id: 'signal-status' });
  // a draw still in flight when the operator has moved on must not paint over the next view
  let stopped = false;

  async function act(label, question, path) {
    if (!(await ctx.confirm(question))) return;
    try {
      await api(path, { method: 'POST' });
      status.className = 'ok';
      status.textContent = `${label}: done`;
    } catch (e) {
      status.className = 'error';
      status.textContent = `${label}: ${e.code} ${e.message}`;
    }
    await draw();
  }

  async function draw() {
    const actor = await api(`/admin/actors/signal/${encodeURIComponent(id)}`);
    const c = actor.context;
    const task = c.signal_type === 'task';
    const [thread, receipts, graph, deliveries] = await Promise.all([
      api(`/thread/${encodeURIComponent(c.thread_id ?? c.reply_to ?? id)}?limit=50`).then((p) => p.signals, () => []),
      api(`/signals/${encodeURIComponent(id)}/receipts?limit=100`).then((p) => p.receipts, () => []),
      task ? api(`/tasks/${encodeURIComponent(id)}/graph`).catch(() => undefined) : undefined,
      deliveriesOf(api, id),
    ]);
    if (stopped) return;
    const actions = h('div', { class: 'actions', role: 'group', ariaLabel: 'Admin actions' });
    const q = (verb) => `${verb} ${c.signal_type} “${String(c.content).slice(0, 60)}”?`;
    if (task && !['acked', 'dead_letter'].includes(actor.state)) actions.append(h('button', { type: 'button', class: 'danger', id: 'action-cancel', onclick: () => act('Cancel', q('Cancel'), `/tasks/${encodeURIComponent(id)}/cancel`) }, 'Cancel task'));
    if (actor.state === 'leased') actions.append(h('button', { type: 'button', id: 'action-release', onclick: () => act('Release', `${q('Release the lease on')} Its holder ${ctx.who(c.claimed_by)} loses it now.`, `/tasks/${encodeURIComponent(id)}/release`) }, 'Release lease'));
    if (actor.state === 'dead_letter') actions.append(h('button', { type: 'button', id: 'action-retry', onclick: () => act('Retry', q('Retry'), `/tasks/${encodeURIComponent(id)}/retry`) }, 'Retry dead letter'));

    root.replaceChildren(
      h('h2', {}, `${c.signal_type} `, badge(actor.state)),
      status,
      h('div', { class: 'grid' },
        section(h, 'signal-fields', 'Signal', fields(h, ctx, c), actions.children.length ? actions : empty(h, 'No admin action applies in this state.')),
        section(h, 'signal-timers', 'Pending timers', actor.timers.length
          ? h('ul', { class: 'plain' }, ...actor.timers.map((t) => h('li', { 'data-timer': t.event }, h('b', {}, t.event), ' ', ctx.fmtTime(t.at))))
          : empty(h, 'None.')),
        section(h, 'signal-history', 'Transitions', h('ol', { class: 'plain' }, ...actor.transitions.map((t) => h('li', {}, h('b', {}, t.event), ` ${t.from ?? '∅'} → ${t.to} `, h('span', { class: 'meta' }, ctx.fmtTime(t.at)))))),
        section(h, 'signal-receipts', 'Receipts', receipts.length
          ? h('table', {}, h('caption', { class: 'sr-only' }, 'Receipts per recipient'), h('tbody', {}, ...receipts.map((r) => h('tr', { 'data-recipient': r.identity_id ?? r.recipient }, h('td', {}, ctx.who(r.identity_id ?? r.recipient)), h('td', {}, r.state ?? r.status ?? ''), h('td', { class: 'meta' }, ctx.fmtTime(r.updated_at ?? r.at))))))
          : empty(h, 'No receipts.')),
        section(h, 'signal-thread', 'Thread', thread.length ? h('ol', { class: 'rows' }, ...thread.map((s) => signalRow(s, ctx))) : empty(h, 'No thread.')),
        section(h, 'signal-graph', 'Dependencies', graphView(h, graph)),
        section(h, 'signal-federation', 'Federation', c.federation ? h('pre', { class: 'json' }, JSON.stringify(c.federation, null, 2)) : empty(h, 'Not federated.')),
        section(h, 'signal-webhooks', 'Webhook deliveries', deliveries.length
          ? h('ul', { class: 'plain' }, ...deliveries.map((d) => h('li', { 'data-delivery': d.id }, `${d.event} → ${d.url} `, badge(d.status ?? d.state), ' ',
            h('button', { type: 'button', class: 'resend', onclick: () => act('Resend', `Resend ${d.event} to ${d.url}?`, `/admin/webhooks/deliveries/${encodeURIComponent(d.id)}/replay`) }, 'Resend'))))
          : empty(h, 'No webhook deliveries.'))));
  }

  await draw();
  let again;
  const off = ctx.live.on('*', (s, type) => {
    if (type === 'state' || s.id !== id) return;
    // a burst of changes redraws once
    again ??= setTimeout(() => { again = undefined; draw().catch(() => {}); }, 50);
  });
  return () => { stopped = true; off(); clearTimeout(again); };
}

function graphView(h, graph) {
  const edges = [...(graph?.upstream ?? []).map((n) => ['needs', n]), ...(graph?.downstream ?? []).map((n) => ['needed by', n])];
  if (!edges.length) return h('p', { class: 'muted' }, 'No dependencies.');
  return h('ul', { class: 'plain' }, ...edges.map(([rel, n]) => h('li', { 'data-edge': rel }, `${rel} `, h('a', { href: `#/signal/${encodeURIComponent(n.id)}` }, n.content ?? n.id), ' ', h('span', { class: 'meta' }, n.task_status ?? n.state ?? ''))));
}

export default { id: 'signal', title: 'Signal', nav: false, render };
