// One box over signals, tasks, memories, identities and artifacts (GET /search, within the key's rights);
// a result opens in place below the list. The query lives in the hash (#/search/<q>) so it survives a reload.
import { badge, recipient } from './signal-row.js';

function results(ctx, r, open) {
  const { h } = ctx;
  const group = (id, title, items, row) => h('section', { class: 'panel', id: `results-${id}`, 'aria-labelledby': `results-${id}-h` },
    h('h3', { id: `results-${id}-h` }, `${title} (${items.length})`),
    items.length ? h('ul', { class: 'plain results' }, ...items.map(row)) : h('p', { class: 'muted' }, 'No match.'));
  const button = (label, item, kind) => h('button', { type: 'button', class: 'linkish', 'data-nav': '', onclick: () => open(kind, item) }, label);
  const sig = (s) => h('li', { 'data-id': s.id }, button(s.content, s, 'signal'), ' ', badge(s.delivery_state), h('span', { class: 'meta' }, ` ${s.signal_type} · ${ctx.who(s.from_identity)} → ${recipient(s, ctx.who)}`));
  return [
    group('signals', 'Signals', r.signals, sig),
    group('tasks', 'Tasks', r.tasks, sig),
    group('memories', 'Memories', r.memories, (m) => h('li', { 'data-id': m.id }, button(m.content, m, 'memory'), h('span', { class: 'meta' }, ` ${m.namespace} · score ${m.score.toFixed(3)}`))),
    group('identities', 'Identities', r.identities, (i) => h('li', { 'data-id': i.id }, button(i.name, i, 'identity'), h('span', { class: 'meta' }, ` ${i.type}`))),
    group('artifacts', 'Artifacts', r.artifacts, (a) => h('li', { 'data-id': a.id }, button(a.name, a, 'artifact'), h('span', { class: 'meta' }, ` ${a.content_type} · ${a.size} bytes`))),
  ];
}

function detail(ctx, kind, item) {
  const { h } = ctx;
  const rows = Object.entries(item).filter(([, v]) => v !== null && v !== undefined && typeof v !== 'object').flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))]);
  const links = {
    signal: h('a', { href: `#/signal/${encodeURIComponent(item.id)}` }, 'Open the full detail'),
    identity: h('a', { href: `#/agents/${encodeURIComponent(item.id)}` }, 'Open in agents'),
    artifact: h('a', { href: `/artifacts/${encodeURIComponent(item.id)}/content` }, 'Download (needs the key: use the artifacts view)'),
    memory: '',
  };
  return h('section', { class: 'panel', id: 'search-detail', 'aria-labelledby': 'search-detail-h', tabIndex: -1 },
    h('h3', { id: 'search-detail-h' }, `${kind} ${item.name ?? item.id}`), h('dl', { class: 'fields' }, ...rows), links[kind]);
}

async function render(root, ctx, param) {
  const { h, api } = ctx;
  const input = h('input', { type: 'search', id: 'search-q', name: 'q', value: param ?? '', placeholder: 'text, type, name, id…', autocomplete: 'off' });
  const form = h('form', { class: 'filters', role: 'search', id: 'search-form' }, h('label', { htmlFor: 'search-q', class: 'sr-only' }, 'Search'), input, h('button', { type: 'submit' }, 'Search'));
  const status = h('p', { role: 'status', class: 'meta', id: 'search-status' });
  const out = h('div', { class: 'grid', id: 'search-results' });
  const slot = h('div', { id: 'search-open' });
  root.append(h('h2', {}, 'Search'), form, status, slot, out);
  let last;
  let stopped = false;

  const open = (kind, item) => {
    slot.replaceChildren(detail(ctx, kind, item));
    slot.firstChild.focus();
  };

  async function run(q) {
    if (!q) return;
    const r = await api(`/search?q=${encodeURIComponent(q)}&limit=20`);
    if (stopped) return;
    last = q;
    const n = r.signals.length + r.tasks.length + r.memories.length + r.identities.length + r.artifacts.length;
    status.textContent = `${n} results for “${q}” (the newest ${r.scanned.signals} signals scanned)`;
    out.replaceChildren(...results(ctx, r, open));
  }

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = input.value.trim();
    // the hash keeps the query; the router re-renders with it
    if (`#/search/${encodeURIComponent(q)}` === location.hash) run(q).catch((e) => { status.textContent = `${e.code}: ${e.message}`; });
    else ctx.navigate(`#/search/${encodeURIComponent(q)}`);
  });
  await run(param).catch((e) => { status.textContent = `${e.code}: ${e.message}`; });
  if (!param) input.focus();

  // a new signal matching the query shows up: search again, at most once a second
  let again;
  const off = ctx.live.on('*', (s, type) => {
    if (type === 'state' || !last || !JSON.stringify(s).toLowerCase().includes(last.toLowerCase())) return;
    again ??= setTimeout(() => { again = undefined; run(last).catch(() => {}); }, 1000);
  });
  return () => { stopped = true; off(); clearTimeout(again); };
}

export default { id: 'search', title: 'Search', render };
