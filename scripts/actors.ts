/**
 * Operator tool over the admin actor routes of a running instance (either backend).
 *   npm run actors -- list [--kind K] [--state S] [--limit N] [--after CURSOR]
 *   npm run actors -- show <kind> <id>
 *   npm run actors -- send <kind> <id> <EVENT> [JSON fields]
 *   npm run actors -- timers <kind> <id>
 *   npm run actors -- history <kind> <id>
 * Every command takes --url (SVC_URL, default http://localhost:3000), --key (SVC_KEY: an admin key) and
 * --json for the raw answer instead of a table.
 */
import { call, main, parseFlags, table, UsageError, type Flags } from './cli.js';

const USAGE = `usage: npm run actors -- <command> [--url URL] [--key KEY] [--json]
  list [--kind K] [--state S] [--limit N] [--after CURSOR]   counts per kind and state, then matching actors
  show <kind> <id>                                           state, version, context, timers, last transitions
  send <kind> <id> <EVENT> [JSON fields]                     send one event (audited); a refused event prints its code
  timers <kind> <id>                                         pending durable timers
  history <kind> <id>                                        last transitions (event, time, request id)`;

const actorPath = (f: Flags) => {
  const [kind, id] = f.args.slice(1);
  if (!kind || !id) throw new UsageError(`${f.args[0]} needs <kind> <id>`);
  return `/admin/actors/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`;
};

const print = (f: Flags, data: unknown, text: () => string) => console.log(f.json ? JSON.stringify(data, null, 2) : text());

function showText(a: any): string {
  return [
    `${a.kind} ${a.id}`,
    `state    ${a.state}`,
    `version  ${a.version}`,
    `context  ${JSON.stringify(a.context, null, 2).replace(/\n/g, '\n         ')}`,
    '',
    'timers',
    a.timers.length ? table(a.timers, ['event', 'at']) : '(none)',
    '',
    'transitions (newest first)',
    a.transitions.length ? table(a.transitions, ['at', 'event', 'from', 'to', 'request_id']) : '(none)',
  ].join('\n');
}

const commands: Record<string, (f: Flags) => Promise<void>> = {
  async list(f) {
    const q = new URLSearchParams(Object.entries(f.opts).filter(([k]) => ['kind', 'state', 'limit', 'after'].includes(k)));
    const data = await call(f, 'GET', `/admin/actors${q.size ? `?${q}` : ''}`);
    print(f, data, () => {
      const counts = Object.entries<Record<string, number>>(data.counts).flatMap(([kind, states]) => Object.entries(states).map(([state, count]) => ({ kind, state, count })));
      const parts = [table(counts, ['kind', 'state', 'count']), '', data.actors.length ? table(data.actors, ['kind', 'id', 'state', 'version', 'updated_at']) : '(no matching actors)'];
      if (data.has_more) parts.push('', `more: --after ${data.cursor}`);
      return parts.join('\n');
    });
  },
  async show(f) {
    const data = await call(f, 'GET', actorPath(f));
    print(f, data, () => showText(data));
  },
  async send(f) {
    const type = f.args[3];
    if (!type) throw new UsageError('send needs <kind> <id> <EVENT>');
    let fields: Record<string, unknown> = {};
    if (f.args[4]) {
      try {
        fields = JSON.parse(f.args[4]);
      } catch {
        throw new UsageError('event fields must be a JSON object');
      }
    }
    const data = await call(f, 'POST', `${actorPath(f)}/events`, { ...fields, type });
    print(f, data, () => `${data.kind} ${data.id}: ${data.transitions[0]?.from ?? '?'} -> ${data.state} (version ${data.version})`);
  },
  async timers(f) {
    const data = await call(f, 'GET', actorPath(f));
    print(f, data.timers, () => (data.timers.length ? table(data.timers, ['event', 'at']) : '(no pending timers)'));
  },
  async history(f) {
    const data = await call(f, 'GET', actorPath(f));
    print(f, data.transitions, () => (data.transitions.length ? table(data.transitions, ['at', 'event', 'from', 'to', 'request_id']) : '(no transitions)'));
  },
};

await main(async () => {
  const f = parseFlags(process.argv.slice(2));
  const cmd = commands[f.args[0]];
  if (!cmd) throw new UsageError(f.args[0] ? `unknown command ${f.args[0]}` : 'a command is required');
  await cmd(f);
}, USAGE);
