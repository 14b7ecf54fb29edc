// Workspace: the folder tree (folders open in place), a file's revision history (#/workspace/<file id>) and a
// line diff of two text revisions, drawn with jsdiff served from /dashboard/vendor/diff/.
import { session } from '../api.js';
import { bytes, errorText, follow, query, table } from './kit.js';

const EVENTS = ['workspace.file_updated'];
const TEXT = /^(text\/|application\/(json|xml|javascript|x-ndjson|yaml))/;

async function children(ctx, parentId) {
  const page = await ctx.api(`/workspace/items?${query({ parent_id: parentId, limit: 100 })}`);
  return page.items.sort((a, b) => (a.kind === b.kind ? a.name.localeCompare(b.name) : a.kind === 'folder' ? -1 : 1));
}

/** `open` holds the folders the operator opened, so a live refresh redraws the tree as it was. */
function itemRow(ctx, item, open) {
  const { h, fmtTime } = ctx;
  if (item.kind === 'file') {
    return h('li', { 'data-id': item.id, class: 'file' },
      h('a', { href: `#/workspace/${encodeURIComponent(item.id)}`, 'data-nav': '' }, item.name),
      h('span', { class: 'meta' }, `${bytes(item.size)} · ${item.revision_count} revisions · ${fmtTime(item.updated_at)}`));
  }
  const list = h('ul', { class: 'tree', hidden: true });
  const toggle = h('button', { type: 'button', class: 'link', 'aria-expanded': 'false', 'data-nav': '' }, `${item.name}/`);
  const show = async (on) => {
    toggle.setAttribute('aria-expanded', String(on));
    list.hidden = !on;
    if (on) open.add(item.id);
    else open.delete(item.id);
    if (on) list.replaceChildren(...(await children(ctx, item.id)).map((c) => itemRow(ctx, c, open)));
  };
  toggle.addEventListener('click', () => show(toggle.getAttribute('aria-expanded') !== 'true'));
  if (open.has(item.id)) show(true).catch(() => {});
  return h('li', { 'data-id': item.id, class: 'folder' }, toggle, list);
}

async function textOf(revisionId) {
  const r = await fetch(`/workspace/revisions/${encodeURIComponent(revisionId)}/content`, { headers: { authorization: `Bearer ${session.key}` } });
  if (!r.ok) throw Object.assign(new Error(r.statusText), { code: `HTTP_${r.status}` });
  return r.text();
}

/** Lines removed and added between two revisions, each with its sign; unchanged runs kept for context. */
async function drawDiff(ctx, box, older, newer) {
  const { h } = ctx;
  const [{ diffLines }, a, b] = await Promise.all([import('/dashboard/vendor/diff/index.js'), textOf(older.id), textOf(newer.id)]);
  const lines = diffLines(a, b).flatMap((part) => {
    const sign = part.added ? '+' : part.removed ? '-' : ' ';
    const cls = part.added ? 'added' : part.removed ? 'removed' : 'same';
    return part.value.replace(/\n$/, '').split('\n').map((l) => h('span', { class: `line ${cls}` }, `${sign} ${l}`));
  });
  box.replaceChildren(
    h('h3', { id: 'diff-h' }, `Revision ${older.number} → ${newer.number}`),
    h('pre', { id: 'diff', class: 'diff', tabIndex: 0, 'aria-labelledby': 'diff-h' }, ...lines.flatMap((l) => [l, '\n'])));
}

async function renderFile(root, ctx, id) {
  const { api, h, who, fmtTime, $ } = ctx;
  const head = h('section', { class: 'panel', id: 'file-detail', 'aria-labelledby': 'file-h' });
  const diffBox = h('section', { class: 'panel', id: 'diff-panel', 'aria-live': 'polite' });
  root.append(head, diffBox);
  const load = async () => {
    const [item, page] = await Promise.all([api(`/workspace/items/${encodeURIComponent(id)}`), api(`/workspace/items/${encodeURIComponent(id)}/history?limit=50`)]);
    const revs = page.revisions;
    const pick = (name, r, checked) => h('input', { type: 'radio', name, value: r.id, checked, ariaLabel: `${name === 'from' ? 'Compare from' : 'Compare to'} revision ${r.number}` });
    const rows = revs.map((r, i) => h('tr', { 'data-revision': r.id },
      h('td', {}, pick('from', r, i === 1)), h('td', {}, pick('to', r, i === 0)),
      h('td', {}, String(r.number)), h('td', {}, bytes(r.size)), h('td', {}, r.content_type), h('td', {}, who(r.created_by)), h('td', {}, fmtTime(r.created_at))));
    const text = TEXT.test(item.content_type ?? '');
    head.replaceChildren(
      h('h3', { id: 'file-h' }, item.name),
      h('p', { class: 'meta' }, `${item.content_type} · ${bytes(item.size)} · ${item.revision_count} revisions`),
      table(h, 'Revisions, newest first', ['From', 'To', 'Revision', 'Size', 'Type', 'By', 'At'], rows, { id: 'revisions' }),
      text ? h('button', { type: 'button', id: 'compare' }, 'Compare') : h('p', { class: 'muted' }, 'Not text: no line diff.'));
    $('#compare')?.addEventListener('click', async () => {
      const at = (name) => revs.find((r) => r.id === head.querySelector(`input[name=${name}]:checked`)?.value);
      const [from, to] = [at('from'), at('to')];
      if (!from || !to) return void diffBox.replaceChildren(h('p', { role: 'alert' }, 'Pick two revisions.'));
      await drawDiff(ctx, diffBox, from.number < to.number ? from : to, from.number < to.number ? to : from).catch((e) => diffBox.replaceChildren(errorText(h, e)));
    });
  };
  await load().catch((e) => head.replaceChildren(errorText(h, e)));
  return follow(ctx, EVENTS, load);
}

async function render(root, ctx, param) {
  const { h } = ctx;
  root.append(h('h2', { class: 'view-title' }, 'Workspace'), h('p', {}, h('a', { href: '#/workspace' }, 'Workspace root')));
  if (param) return renderFile(root, ctx, param);
  const tree = h('ul', { id: 'workspace-tree', class: 'tree' });
  root.append(h('section', { class: 'panel', 'aria-labelledby': 'tree-h' }, h('h3', { id: 'tree-h' }, 'Files'), tree));
  const open = new Set();
  const load = async () => tree.replaceChildren(...(await children(ctx, undefined)).map((c) => itemRow(ctx, c, open)));
  await load().catch((e) => tree.replaceChildren(h('li', {}, errorText(h, e))));
  return follow(ctx, EVENTS, load);
}

export default { id: 'workspace', title: 'Workspace', render };
