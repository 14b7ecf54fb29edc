// Artifacts: the newest uploads with a download (fetched with the signed-in key, handed to the browser as a
// file) and a share link (a signed URL anyone may open until it expires).
import { session } from '../api.js';
import { bytes, errorText, follow, table } from './kit.js';

const EVENTS = ['artifact.uploaded'];
const SHARE_S = 3600;

async function download(a) {
  const r = await fetch(`/artifacts/${encodeURIComponent(a.id)}`, { headers: { authorization: `Bearer ${session.key}` } });
  if (!r.ok) throw Object.assign(new Error(r.statusText), { code: `HTTP_${r.status}` });
  const url = URL.createObjectURL(await r.blob());
  const link = Object.assign(document.createElement('a'), { href: url, download: a.name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

function row(ctx, a, out) {
  const { api, h, who, fmtTime } = ctx;
  const share = h('button', { type: 'button', class: 'secondary', ariaLabel: `Share link for ${a.name}` }, 'Share link');
  share.addEventListener('click', async () => {
    try {
      const s = await api(`/artifacts/${encodeURIComponent(a.id)}/share`, { method: 'POST', body: { expires_in: SHARE_S } });
      out.replaceChildren(h('span', {}, `${a.name}: `), h('a', { href: s.url, class: 'share-url', 'data-artifact': a.id }, s.url), h('span', { class: 'meta' }, ` until ${fmtTime(s.expires_at)}`));
    } catch (e) {
      out.replaceChildren(errorText(h, e));
    }
  });
  const get = h('button', { type: 'button', ariaLabel: `Download ${a.name}` }, 'Download');
  get.addEventListener('click', () => download(a).catch((e) => out.replaceChildren(errorText(h, e))));
  return h('tr', { 'data-id': a.id },
    h('td', {}, a.name), h('td', {}, a.content_type), h('td', {}, bytes(a.size)), h('td', {}, a.visibility),
    h('td', {}, who(a.uploaded_by)), h('td', {}, fmtTime(a.created_at)), h('td', { class: 'actions' }, get, share));
}

async function render(root, ctx) {
  const { api, h } = ctx;
  const out = h('p', { id: 'share-out', 'aria-live': 'polite' });
  const box = h('div', { id: 'artifact-list' });
  root.append(h('h2', { class: 'view-title' }, 'Artifacts'), h('section', { class: 'panel', 'aria-labelledby': 'art-h' }, h('h3', { id: 'art-h' }, 'Newest uploads'), out, box));
  const load = async () => {
    const page = await api('/artifacts/list?limit=50');
    box.replaceChildren(page.artifacts.length
      ? table(h, 'Artifacts, newest first', ['Name', 'Type', 'Size', 'Visibility', 'Uploaded by', 'At', 'Actions'], page.artifacts.map((a) => row(ctx, a, out)), { id: 'artifacts' })
      : h('p', { class: 'muted' }, 'No artifacts yet.'));
  };
  await load().catch((e) => box.replaceChildren(errorText(h, e)));
  return follow(ctx, EVENTS, load);
}

export default { id: 'artifacts', title: 'Artifacts', render };
