// Small pieces the browser views share: tables with real headers, a debounced refresh that follows the live
// stream, and query strings without empty fields.

/** A table with a caption (for screen readers) and header cells; `rows` are arrays of cells (nodes or text). */
export function table(h, caption, headers, rows, attrs = {}) {
  return h('table', { class: 'grid-table', ...attrs },
    h('caption', { class: 'sr-only' }, caption),
    h('thead', {}, h('tr', {}, ...headers.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, ...rows.map((r) => (r instanceof Node ? r : h('tr', {}, ...r.map((c) => h('td', {}, c)))))));
}

/**
 * Calls `load` again when any of `types` arrives on the shared stream (at most once per `ms`), and every
 * `pollMs` when set, for state no stream event announces (a delivery's attempts, audit entries). Returns the
 * cleanup that stops both.
 */
export function follow(ctx, types, load, { ms = 300, pollMs } = {}) {
  let timer;
  let stopped = false;
  const again = () => {
    if (stopped || timer) return;
    timer = setTimeout(() => { timer = undefined; if (!stopped) load().catch(() => {}); }, ms);
  };
  const offs = types.map((t) => ctx.live.on(t, again));
  const poll = pollMs ? setInterval(again, pollMs) : undefined;
  return () => {
    stopped = true;
    clearTimeout(timer);
    clearInterval(poll);
    for (const off of offs) off();
  };
}

export const query = (o) => new URLSearchParams(Object.entries(o).filter(([, v]) => v !== undefined && v !== null && v !== '')).toString();

export const bytes = (n) => (n == null ? '' : n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`);

export function errorText(h, e) {
  return h('p', { class: 'error', role: 'alert' }, `${e.code ?? 'ERROR'}: ${e.message}`);
}
