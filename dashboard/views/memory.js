// Memory: namespaces with their counts, a namespace's newest memories, search (semantic or keyword) within a
// namespace the key may read, and one memory with its relations drawn as a graph (#/memory/<id>).
import { errorText, follow, query, table } from './kit.js';

const EVENTS = ['memory.stored', 'memory.updated', 'memory.forgotten'];
const SVG = 'http://www.w3.org/2000/svg';
const short = (s, n = 28) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

/** The root in the middle, the others on a ring per depth; each edge a line with its relation at the middle. */
export function graphSvg(graph, width = 640, height = 360) {
  const at = new Map();
  const cx = width / 2;
  const cy = height / 2;
  const byDepth = new Map();
  for (const n of graph.nodes) byDepth.set(n.depth, [...(byDepth.get(n.depth) ?? []), n]);
  const rings = Math.max(1, byDepth.size - 1);
  for (const [depth, nodes] of byDepth) {
    nodes.forEach((n, i) => {
      const a = (2 * Math.PI * i) / nodes.length - Math.PI / 3 + depth * 0.4;
      at.set(n.id, [cx + ((depth * (cx - 90)) / rings) * Math.cos(a), cy + ((depth * (cy - 30)) / rings) * Math.sin(a)]);
    });
  }
  const label = `Relations of memory ${graph.root}: ${graph.edges.length} edges between ${graph.nodes.length} memories`;
  const out = svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': label, class: 'graph' });
  const arrow = svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  arrow.append(svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrow' }));
  const defs = svg('defs');
  defs.append(arrow);
  out.append(defs);
  for (const e of graph.edges) {
    const [x1, y1] = at.get(e.from_id);
    const [tx, ty] = at.get(e.to_id);
    // the arrow stops at the target's circle, so its head shows which way the relation points
    const len = Math.hypot(tx - x1, ty - y1) || 1;
    const [x2, y2] = [tx - ((tx - x1) * 9) / len, ty - ((ty - y1) * 9) / len];
    out.append(svg('line', { x1, y1, x2, y2, class: 'edge', 'marker-end': 'url(#arrow)' }), svg('text', { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 4, class: 'edge-label', 'text-anchor': 'middle' }, e.relation));
  }
  for (const n of graph.nodes) {
    const [x, y] = at.get(n.id);
    const g = svg('g', { class: n.id === graph.root ? 'node root' : 'node', 'data-id': n.id });
    g.append(svg('circle', { cx: x, cy: y, r: 7 }), svg('text', { x, y: y + 20, 'text-anchor': 'middle' }, short(n.content)));
    out.append(g);
  }
  return out;
}

function memoryRow(h, m) {
  return h('li', { 'data-id': m.id },
    h('a', { href: `#/memory/${encodeURIComponent(m.id)}`, 'data-nav': '' }, short(m.content, 90)),
    h('span', { class: 'meta' }, [m.namespace, m.memory_type, m.entity, m.score !== undefined ? `score ${Number(m.score).toFixed(3)}` : undefined].filter(Boolean).join(' · ')));
}

async function renderDetail(root, ctx, id) {
  const { api, h, who, fmtTime } = ctx;
  const box = h('section', { class: 'panel', id: 'memory-detail', 'aria-labelledby': 'memory-detail-h' });
  root.append(box);
  const load = async () => {
    const [m, graph] = await Promise.all([api(`/memory/${encodeURIComponent(id)}`), api(`/memory/graph/${encodeURIComponent(id)}?depth=2`)]);
    const names = new Map(graph.nodes.map((n) => [n.id, n.content]));
    const end = (nid) => h('a', { href: `#/memory/${encodeURIComponent(nid)}` }, short(names.get(nid) ?? nid, 40));
    box.replaceChildren(
      h('h3', { id: 'memory-detail-h' }, 'Memory'),
      h('p', { class: 'content' }, m.content),
      h('p', { class: 'meta' }, `${m.namespace} · ${m.memory_type ?? 'untyped'} · by ${who(m.owner)} · ${fmtTime(m.created_at)}`),
      h('h3', {}, 'Relations'),
      graph.edges.length ? graphSvg(graph) : h('p', { class: 'muted' }, 'No relations.'),
      h('ul', { id: 'memory-edges', class: 'rows' }, ...graph.edges.map((e) => h('li', { 'data-edge': e.id }, end(e.from_id), ` ${e.relation} `, end(e.to_id)))));
  };
  await load().catch((e) => box.replaceChildren(errorText(h, e)));
  return follow(ctx, EVENTS, load);
}

async function render(root, ctx, param) {
  const { api, h, $ } = ctx;
  root.append(h('h2', { class: 'view-title' }, 'Memory'));
  if (param) return renderDetail(root, ctx, param);
  const state = { namespace: undefined };
  root.append(
    h('section', { class: 'panel', 'aria-labelledby': 'ns-h' }, h('h3', { id: 'ns-h' }, 'Namespaces'), h('div', { id: 'namespaces' })),
    h('section', { class: 'panel', 'aria-labelledby': 'mem-search-h' },
      h('h3', { id: 'mem-search-h' }, 'Search'),
      h('form', { id: 'memory-search', class: 'filters' },
        h('label', { htmlFor: 'mem-q' }, 'Query'), h('input', { id: 'mem-q', type: 'search', required: true }),
        h('label', { htmlFor: 'mem-ns' }, 'Namespace'), h('select', { id: 'mem-ns' }),
        h('label', { htmlFor: 'mem-mode' }, 'Mode'),
        h('select', { id: 'mem-mode' }, h('option', { value: 'semantic' }, 'semantic'), h('option', { value: 'keyword' }, 'keyword')),
        h('button', { type: 'submit' }, 'Search')),
      h('ol', { id: 'memory-results', class: 'rows' })),
    h('section', { class: 'panel', 'aria-labelledby': 'mem-recent-h' }, h('h3', { id: 'mem-recent-h' }, 'Newest memories'), h('ol', { id: 'memory-recent', class: 'rows' })));

  async function loadNamespaces() {
    const st = await api('/memory/stats');
    state.namespace ??= st.namespaces[0]?.namespace;
    const pick = (ns) => h('button', { type: 'button', class: 'link', 'aria-pressed': String(ns === state.namespace), onclick: () => { state.namespace = ns; refresh(); } }, ns);
    $('#namespaces').replaceChildren(table(h, 'Namespaces and their memory counts', ['Namespace', 'Memories'], st.namespaces.map((n) => [pick(n.namespace), String(n.count)]), { id: 'namespace-table' }));
    const sel = $('#mem-ns');
    const keep = sel.value || state.namespace;
    sel.replaceChildren(...st.namespaces.map((n) => h('option', { value: n.namespace, selected: n.namespace === keep }, n.namespace)));
  }
  async function loadRecent() {
    if (!state.namespace) return void $('#memory-recent').replaceChildren(h('li', { class: 'muted' }, 'No memories yet.'));
    const page = await api(`/memory/list?${query({ namespace: state.namespace, limit: 20 })}`);
    $('#memory-recent').replaceChildren(...page.memories.map((m) => memoryRow(h, m)));
  }
  async function refresh() {
    await loadNamespaces();
    await loadRecent();
  }
  $('#memory-search').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const out = $('#memory-results');
    try {
      const r = await api('/memory/query', { method: 'POST', body: { query: $('#mem-q').value, namespace: $('#mem-ns').value, mode: $('#mem-mode').value, limit: 20 } });
      out.replaceChildren(...(r.memories.length ? r.memories.map((m) => memoryRow(h, m)) : [h('li', { class: 'muted' }, 'Nothing found.')]));
    } catch (e) {
      out.replaceChildren(h('li', {}, errorText(h, e)));
    }
  });
  await refresh().catch((e) => root.append(errorText(h, e)));
  return follow(ctx, EVENTS, refresh);
}

export default { id: 'memory', title: 'Memory', render };
