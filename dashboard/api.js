// The service's REST envelope and SSE stream, as the console uses them. The key lives in sessionStorage only.
const KEY = 'svc_dashboard_key';

export const session = {
  get key() { return sessionStorage.getItem(KEY); },
  set(key) { sessionStorage.setItem(KEY, key); },
  clear() { sessionStorage.removeItem(KEY); },
};

export class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

export async function api(path, { method = 'GET', body } = {}) {
  const headers = { authorization: `Bearer ${session.key}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const json = await r.json().catch(() => ({}));
  if (!r.ok) throw new ApiError(r.status, json.error?.code ?? 'HTTP_' + r.status, json.error?.message ?? r.statusText);
  return json.data;
}

/** events the browser views follow besides signals (EventSource hands over only the event names it is told) */
const BROWSER_EVENTS = ['memory.stored', 'memory.updated', 'memory.forgotten', 'workspace.file_updated', 'artifact.uploaded'];

/** The console's one EventSource on /signals/stream: every `signal` and `signal.updated` event goes to `onEvent(type, signal)`, and so do the browser views' events. */
export function stream(onEvent, onState) {
  const es = new EventSource(`/signals/stream?${new URLSearchParams({ token: session.key })}`);
  for (const type of ['signal', 'signal.updated', ...BROWSER_EVENTS]) es.addEventListener(type, (ev) => onEvent(type, JSON.parse(ev.data)));
  es.addEventListener('open', () => onState('live'));
  es.addEventListener('error', () => onState(es.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting'));
  return es;
}
