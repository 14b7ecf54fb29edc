/** The `svc` subcommands over REST and /rpc: each one call (or one per id given), printed compactly or as JSON. */
import { call, CliError, rpc, usage, type Target } from './http.js';
import { compact, firstLine, signalLine, type SignalLike } from './format.js';
import type { Credentials, Files } from './files.js';
import { openCursor } from './wait.js';

export interface Ctx {
  files: Files;
  json: boolean;
  /** --url / SVC_URL, else the joined service's */
  url?: string;
  /** --key / SVC_KEY, else the stored key */
  key?: string;
  out(text: string): void;
}

/** The service and key to call, and who the caller is; AUTH_KEY_MISSING until `svc join` (or SVC_KEY). */
export function joined(ctx: Ctx): Target & { me?: string; creds?: Credentials } {
  const creds = ctx.files.credentials();
  const key = ctx.key ?? creds?.key;
  const url = (ctx.url ?? creds?.url ?? 'http://localhost:3000').replace(/\/+$/, '');
  if (!key) throw new CliError('AUTH_KEY_MISSING', 'not joined: run `svc join <invite URL or code>` (or set SVC_KEY)');
  return { url, key, me: key === creds?.key ? creds?.identity_id : undefined, creds };
}

/** The caller's identity id: the stored one, or asked of the service when a key came from elsewhere. */
async function me(t: ReturnType<typeof joined>): Promise<string> {
  return t.me ?? (await rpc(t, 'identity.whoami')).identity.id;
}

const print = (ctx: Ctx, data: unknown, text: () => string) => ctx.out(ctx.json ? JSON.stringify(data) : text());

/** An invite URL (`…/invite/<code>` or `…/invite/<code>/skill`) names the service too; a bare code needs --url. */
export function parseInvite(input: string, fallbackUrl: string): { url: string; code: string } {
  const m = /^(https?:\/\/.+?)\/invite\/([^/?#]+)/.exec(input);
  if (m) return { url: m[1], code: decodeURIComponent(m[2]) };
  if (/^https?:/.test(input)) throw usage(`not an invite URL: ${input} (expected …/invite/<code>)`, 'VALIDATION_INVALID_TYPE');
  return { url: fallbackUrl.replace(/\/+$/, ''), code: input };
}

export async function join(ctx: Ctx, invite: string | undefined, o: { name?: string; type?: string; print?: boolean }) {
  if (!invite) throw usage('svc join needs an invite URL or code');
  const { url, code } = parseInvite(invite, ctx.url ?? 'http://localhost:3000');
  // the invite's own name unless told otherwise: its skill document is titled "Join <url> as <name>"
  const name = o.name ?? (await inviteName(url, code));
  const res = await call({ url }, 'POST', '/invite', { code, name, type: o.type ?? 'agent' });
  const creds: Credentials = { url, key: res.api_key, identity_id: res.identity.id, name: res.identity.name };
  if (o.print) return print(ctx, { ...creds }, () => creds.key);
  ctx.files.saveCredentials(creds);
  // wake-ups count from now: `svc wait` resumes from this cursor
  const cursor = await openCursor(creds).catch(() => undefined);
  if (cursor) ctx.files.saveState({ ...ctx.files.state(), cursor });
  print(ctx, { identity: res.identity, url, credentials: ctx.files.credentialsFile }, () => `joined ${url} as ${creds.name} (${creds.identity_id}); key stored in ${ctx.files.credentialsFile}`);
}

async function inviteName(url: string, code: string): Promise<string> {
  const r = await fetch(`${url}/invite/${encodeURIComponent(code)}/skill`, { signal: AbortSignal.timeout(10_000) }).catch((e: Error) => {
    throw new CliError('SERVICE_UNREACHABLE', `${url}: ${e.message}`);
  });
  const text = await r.text();
  if (!r.ok) {
    const err = (() => { try { return JSON.parse(text).error; } catch { return undefined; } })();
    throw new CliError(err?.code ?? 'INVITE_NOT_FOUND', err?.message ?? `invite ${code} answered ${r.status}`);
  }
  const m = /^# Join \S+ as (.+)$/m.exec(text);
  if (!m) throw usage('the invite does not say its name: pass --name', 'VALIDATION_FIELD_REQUIRED');
  return m[1].trim();
}

export async function whoami(ctx: Ctx) {
  const t = joined(ctx);
  const w = await rpc(t, 'identity.whoami');
  const names = (xs: { name: string }[]) => xs.map((x) => x.name).join(', ') || '-';
  print(ctx, w, () => `${w.identity.name} (${w.identity.id}) on ${t.url}${w.identity.is_admin ? ', admin' : ''}\nroles: ${names(w.roles)}\nrings: ${names(w.rings)}`);
}

export interface SendOpts {
  to?: string;
  role?: string;
  ring?: string;
  type?: string;
  urgency?: string;
  parent?: string;
  payload?: string;
}

export async function send(ctx: Ctx, words: string[], o: SendOpts) {
  const content = words.join(' ');
  if (!content) throw usage('svc send needs the content to send');
  const body: Record<string, unknown> = { signal_type: o.type ?? 'query', content };
  if (o.to) body.to_identity = o.to;
  if (o.role) body.to_role = o.role;
  if (o.ring) body.to_ring = o.ring;
  if (o.parent) body.parent_id = o.parent;
  if (o.urgency !== undefined) body.urgency = number(o.urgency, 'urgency');
  if (o.payload !== undefined) body.payload = jsonArg(o.payload, 'payload');
  const s = await call(joined(ctx), 'POST', '/emit', body);
  print(ctx, s, () => `sent ${s.id}`);
}

export async function inbox(ctx: Ctx, o: { unread?: boolean; limit?: string; type?: string; full?: boolean }) {
  const t = joined(ctx);
  const q = new URLSearchParams({ limit: String(o.limit ? int(o.limit, 'limit') : 20) });
  if (o.unread) q.set('receipt_state', 'unread');
  if (o.type) q.set('type', o.type);
  const page = await call(t, 'GET', `/inbox/identity/${encodeURIComponent(await me(t))}?${q}`);
  const items: SignalLike[] = page.signals;
  ctx.files.markSeen(items.map((s) => s.id));
  print(ctx, { ...page, signals: o.full ? items : items.map((s) => ({ ...compact(s), receipt_state: s.receipt_state })) }, () => (items.length ? items.map(signalLine).join('\n') : 'inbox empty'));
}

export async function ack(ctx: Ctx, ids: string[]) {
  if (!ids.length) throw usage('svc ack needs one or more signal ids');
  const t = joined(ctx);
  const done: unknown[] = [];
  for (const id of ids) done.push(await call(t, 'POST', '/inbox/acknowledge', { signal_id: id }));
  ctx.files.markSeen(ids);
  print(ctx, done, () => ids.map((id) => `acknowledged ${id}`).join('\n'));
}

export async function claimNext(ctx: Ctx, o: { types?: string; lease?: string }) {
  const params: Record<string, unknown> = {};
  if (o.types) params.task_types = o.types.split(',').map((s) => s.trim()).filter(Boolean);
  if (o.lease) params.lease_ms = int(o.lease, 'lease') * 1000;
  const r = await rpc(joined(ctx), 'workflow.next', params);
  if (r.signal) ctx.files.markSeen([r.signal.id]);
  print(ctx, r, () => (r.signal ? `claimed ${signalLine(r.signal)}\nlease ends ${r.signal.claim_expires_at}; finish with: svc done ${r.signal.id}` : 'no open task to claim'));
}

/**
 * Completes a claimed task (or releases it with --failed). A result is a reply in the task's thread, to its
 * sender: the ack itself carries none.
 */
export async function done(ctx: Ctx, id: string | undefined, o: { result?: string; failed?: boolean }) {
  if (!id) throw usage('svc done needs the task id');
  const result = o.result !== undefined ? jsonArg(o.result, 'result') : undefined;
  const t = joined(ctx);
  const signal = await call(t, 'POST', '/ack', { signal_id: id, outcome: o.failed ? 'failed' : 'completed' });
  let reply: any;
  if (result !== undefined) {
    const body = { signal_type: 'artifact', content: firstLine(typeof result === 'string' ? result : JSON.stringify(result), 200), parent_id: id, payload: { result, task_id: id }, tags: ['task.result'] };
    reply = await call(t, 'POST', '/emit', signal.from_identity ? { ...body, to_identity: signal.from_identity } : body);
  }
  print(ctx, { signal, ...(reply ? { result: reply } : {}) }, () => `${o.failed ? 'released' : 'completed'} ${id}${reply ? `; result sent as ${reply.id}` : ''}`);
}

export async function reserve(ctx: Ctx, paths: string[], o: { project?: string; ttl?: string; shared?: boolean; reason?: string }) {
  if (!paths.length) throw usage('svc reserve needs one or more path globs');
  const body: Record<string, unknown> = { paths, exclusive: !o.shared };
  if (o.project) body.project = o.project;
  if (o.ttl) body.ttl_s = int(o.ttl, 'ttl');
  if (o.reason) body.reason = o.reason;
  const r = await call(joined(ctx), 'POST', '/reservations', body);
  print(ctx, r, () =>
    [
      ...r.granted.map((g: any) => `reserved ${g.path} (${g.id}) until ${g.expires_at}`),
      ...r.conflicts.map((c: any) => `conflict ${c.path}: held by ${c.reservation.identity} as ${c.reservation.path}${c.reservation.reason ? ` (${c.reservation.reason})` : ''}`),
    ].join('\n'),
  );
  // a partial grant is not an error of the service, but a script must see it
  return r.conflicts.length ? 3 : 0;
}

/** Releases the reservations named, or every active one the caller holds (in --project). */
export async function release(ctx: Ctx, ids: string[], o: { project?: string }) {
  const t = joined(ctx);
  let targets = ids;
  if (!targets.length) {
    const q = new URLSearchParams({ identity: await me(t), limit: '100' });
    if (o.project) q.set('project', o.project);
    targets = (await call(t, 'GET', `/reservations?${q}`)).reservations.map((r: any) => r.id);
  }
  const released: any[] = [];
  for (const id of targets) released.push(await call(t, 'POST', `/reservations/${encodeURIComponent(id)}/release`));
  print(ctx, released, () => (released.length ? released.map((r: any) => `released ${r.path} (${r.id})`).join('\n') : 'nothing to release'));
}

function int(v: string, field: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw usage(`--${field} must be a positive integer`, 'VALIDATION_INVALID_TYPE');
  return n;
}

function number(v: string, field: string): number {
  const n = Number(v);
  if (!Number.isFinite(n)) throw usage(`--${field} must be a number`, 'VALIDATION_INVALID_TYPE');
  return n;
}

function jsonArg(v: string, field: string): unknown {
  try {
    return JSON.parse(v);
  } catch {
    throw usage(`--${field} must be JSON`, 'VALIDATION_INVALID_TYPE');
  }
}
