// Integrations: webhooks with their newest deliveries (each attempt's status, latency and error) and replay;
// federation peers with their trust expiry, outbound calls by outcome, the last failure and inbound usage.
import { errorText, follow, table } from './kit.js';

// deliveries follow the events they carry; their retries announce nothing, so a slow poll catches those
const POLL_MS = 3000;
const DELIVERIES = 10;
const CALLS = 5;

function attemptsCell(h, d) {
  if (!d.attempts.length) return h('span', { class: 'muted' }, 'none yet');
  const line = (a) => `#${a.attempt} ${a.status} ${a.response_code ?? '–'} ${a.latency_ms ?? '–'} ms${a.error ? ` ${a.error}` : ''}`;
  return h('details', {}, h('summary', {}, line(d.attempts.at(-1))), h('ol', { class: 'attempts' }, ...d.attempts.map((a) => h('li', {}, `${line(a)} · ${new Date(a.at).toLocaleTimeString()}`))));
}

function deliveryRow(ctx, d, refresh) {
  const { api, h, confirm, fmtTime } = ctx;
  const last = d.attempts.at(-1);
  const replay = h('button', { type: 'button', ariaLabel: `Replay delivery ${d.id}` }, 'Replay');
  replay.addEventListener('click', async () => {
    if (!(await confirm(`Replay delivery ${d.id} (${d.event}) to this webhook now?`))) return;
    replay.disabled = true;
    try {
      await api(`/admin/webhooks/deliveries/${encodeURIComponent(d.id)}/replay`, { method: 'POST', body: {} });
    } catch (e) {
      replay.replaceWith(errorText(h, e));
    }
    await refresh();
  });
  return h('tr', { 'data-delivery': d.id, 'data-status': d.status },
    h('td', {}, d.event), h('td', {}, h('span', { class: `badge state-${d.status}` }, d.status)), h('td', {}, String(d.attempt_count)),
    h('td', {}, last?.latency_ms == null ? '–' : `${last.latency_ms} ms`), h('td', {}, attemptsCell(h, d)), h('td', {}, fmtTime(last?.at)), h('td', {}, replay));
}

async function webhookSection(ctx, w, refresh) {
  const { api, h } = ctx;
  const page = await api(`/admin/webhooks/${encodeURIComponent(w.id)}/deliveries?limit=${DELIVERIES}`);
  return h('article', { class: 'webhook', 'data-id': w.id },
    h('h4', {}, w.url, ' ', h('span', { class: `badge ${w.active ? 'state-acked' : 'state-dead_letter'}` }, w.active ? 'active' : 'paused')),
    h('p', { class: 'meta' }, `${w.description ?? ''} events: ${w.events.join(', ')}`),
    page.deliveries.length
      ? table(h, `Newest deliveries to ${w.url}`, ['Event', 'Status', 'Attempts', 'Latency', 'Last attempt', 'At', 'Action'], page.deliveries.map((d) => deliveryRow(ctx, d, refresh)))
      : h('p', { class: 'muted' }, 'No deliveries yet.'));
}

function trustCell(h, p) {
  if (!p.has_trust) return h('span', { class: 'muted' }, 'no trust');
  if (!p.expires_at) return 'never expires';
  const left = Date.parse(p.expires_at) - Date.now();
  const text = left <= 0 || p.trust_expired ? `expired ${new Date(p.expires_at).toLocaleString()}` : `expires ${new Date(p.expires_at).toLocaleString()} (in ${Math.ceil(left / 3600_000)} h)`;
  return h('span', { class: left <= 0 ? 'error' : '' }, text);
}

function callsCell(h, calls) {
  if (!calls.length) return h('span', { class: 'muted' }, 'none');
  const last = (c) => c.attempts.at(-1);
  const line = (c) => `${c.call} ${c.status}${last(c) ? ` · ${last(c).response_code ?? '–'} ${last(c).latency_ms ?? '–'} ms${last(c).error ? ` ${last(c).error}` : ''}` : ''}`;
  return h('ol', { class: 'calls' }, ...calls.map((c) => h('li', { 'data-call': c.id, 'data-status': c.status }, line(c))));
}

function peerRow(h, p, calls) {
  const d = p.deliveries;
  const err = d.last_error ? `${d.last_error.call} ${d.last_error.error} · ${new Date(d.last_error.at).toLocaleString()}` : '–';
  return h('tr', { 'data-peer': p.id },
    h('td', {}, p.name), h('td', {}, p.endpoint), h('td', {}, h('span', { class: 'badge' }, p.status)), h('td', {}, trustCell(h, p)),
    h('td', {}, `${d.delivered} delivered · ${d.failed} failed · ${d.pending} pending`), h('td', { class: 'peer-calls' }, callsCell(h, calls)), h('td', { class: 'peer-error' }, err),
    h('td', {}, p.usage?.requests ? `${p.usage.requests.used} of ${p.usage.requests.limit} this window` : 'unlimited'));
}

async function render(root, ctx) {
  const { api, h } = ctx;
  const hooks = h('div', { id: 'webhooks' });
  const peers = h('div', { id: 'peers' });
  root.append(h('h2', { class: 'view-title' }, 'Integrations'),
    h('section', { class: 'panel', 'aria-labelledby': 'wh-h' }, h('h3', { id: 'wh-h' }, 'Webhooks'), hooks),
    h('section', { class: 'panel', 'aria-labelledby': 'peers-h' }, h('h3', { id: 'peers-h' }, 'Federation peers'), peers));
  const load = async () => {
    const [list, peerList] = await Promise.all([api('/admin/webhooks'), api('/admin/peers')]);
    const [sections, calls] = await Promise.all([
      Promise.all(list.map((w) => webhookSection(ctx, w, load))),
      Promise.all(peerList.map((p) => api(`/admin/peers/${encodeURIComponent(p.id)}/calls?limit=${CALLS}`).then((c) => c.calls))),
    ]);
    hooks.replaceChildren(...(sections.length ? sections : [h('p', { class: 'muted' }, 'No webhooks.')]));
    peers.replaceChildren(peerList.length
      ? table(h, 'Federation peers', ['Peer', 'Endpoint', 'Status', 'Trust', 'Outbound calls', 'Recent calls', 'Last failure', 'Inbound requests'], peerList.map((p, i) => peerRow(h, p, calls[i])), { id: 'peer-table' })
      : h('p', { class: 'muted' }, 'No peers.'));
  };
  await load().catch((e) => hooks.replaceChildren(errorText(h, e)));
  return follow(ctx, ['*'], load, { ms: 500, pollMs: POLL_MS });
}

export default { id: 'integrations', title: 'Integrations', render };
