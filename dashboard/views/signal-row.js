// One signal as a list row that opens its detail: shared by the overview, search and agents views.
import { h } from '../dom.js';

export const badge = (s) => h('span', { class: `badge state-${s}` }, s);

export function recipient(s, who) {
  return s.to_identity ? who(s.to_identity) : s.to_role ? `role ${s.to_role}` : s.to_ring ? `ring ${s.to_ring}` : 'everyone';
}

export function signalRow(s, ctx) {
  return h('li', { 'data-id': s.id, 'data-type': s.signal_type },
    h('a', { class: 'type', href: `#/signal/${encodeURIComponent(s.id)}`, 'data-nav': '' }, s.signal_type), badge(s.delivery_state), h('span', { class: 'meta' }, ctx.fmtTime(s.created_at)),
    h('span', { class: 'content' }, s.content),
    h('span', { class: 'meta content' }, `${ctx.who(s.from_identity)} → ${recipient(s, ctx.who)}`));
}

/** newest first: ids are time-ordered */
export const newestFirst = (a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);
