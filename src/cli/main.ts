/**
 * `svc`: join the coordination service and stay in touch from a shell or a coding agent's hooks.
 * Exit codes: 0 done, 1 the service refused (or could not be reached), 2 a usage error, 3 a reservation
 * partly granted, 124 `svc wait` timed out. Errors are one line, `CODE: message`, with a catalogue code.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import * as cmd from './commands.js';
import { configDir, Files } from './files.js';
import { agentOf, HOOK_EVENTS, install, runHook, uninstall, type HookEvent } from './hooks.js';
import { CliError, usage } from './http.js';
import { compact, signalLine } from './format.js';
import { mcpConfig } from './mcp-config.js';
import { waitForItems } from './wait.js';

type Options = NonNullable<ParseArgsConfig['options']>;
type Values = Record<string, string | boolean | undefined>;

interface Command {
  args: string;
  summary: string;
  options?: Options;
  /** option lines of the help */
  help?: string[];
  run(ctx: cmd.Ctx, values: Values, args: string[]): Promise<number | void>;
}

const GLOBAL: Options = {
  json: { type: 'boolean' },
  url: { type: 'string' },
  key: { type: 'string' },
  config: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};
const GLOBAL_HELP = [
  '--json          machine-readable output (errors too)',
  '--url URL       the service (default: the joined one, SVC_URL, http://localhost:3000)',
  '--key KEY       an API key instead of the stored one (SVC_KEY)',
  '--config DIR    where svc keeps its key and state (SVC_CONFIG_DIR, $XDG_CONFIG_HOME/svc, ~/.config/svc)',
];

const s = (v: unknown) => (typeof v === 'string' ? v : undefined);

const COMMANDS: Record<string, Command> = {
  join: {
    args: '<invite URL or code>',
    summary: 'redeem an invite and store the key (user-only file), or print it with --print',
    options: { name: { type: 'string' }, type: { type: 'string' }, print: { type: 'boolean' } },
    help: ['--name NAME     identity name (default: the invite\'s)', '--type TYPE     agent (default) or human', '--print         print the key instead of storing it'],
    run: (ctx, v, a) => cmd.join(ctx, a[0], { name: s(v.name), type: s(v.type), print: v.print === true }),
  },
  whoami: { args: '', summary: 'who the stored key is: identity, roles, rings', run: (ctx) => cmd.whoami(ctx) },
  send: {
    args: '<content...>',
    summary: 'emit a signal (default type query; no target = broadcast)',
    options: { to: { type: 'string' }, role: { type: 'string' }, ring: { type: 'string' }, type: { type: 'string' }, urgency: { type: 'string' }, parent: { type: 'string' }, payload: { type: 'string' } },
    help: ['--to ID         an identity id', '--role NAME     a role', '--ring NAME     a ring', '--type TYPE     signal type (pulse sense task query alert artifact proposal shift)', '--urgency N     0..1', '--parent ID     reply in that thread', '--payload JSON  structured payload'],
    run: (ctx, v, a) => cmd.send(ctx, a, { to: s(v.to), role: s(v.role), ring: s(v.ring), type: s(v.type), urgency: s(v.urgency), parent: s(v.parent), payload: s(v.payload) }),
  },
  inbox: {
    args: '',
    summary: 'your inbox, most urgent first',
    options: { unread: { type: 'boolean' }, limit: { type: 'string' }, type: { type: 'string' }, full: { type: 'boolean' } },
    help: ['--unread        only items not acknowledged yet', '--limit N       1..100 (default 20)', '--type T,U      signal types', '--full          whole signals in --json (default: compact)'],
    run: (ctx, v) => cmd.inbox(ctx, { unread: v.unread === true, limit: s(v.limit), type: s(v.type), full: v.full === true }),
  },
  ack: { args: '<id...>', summary: 'acknowledge inbox items (your receipt)', run: (ctx, _v, a) => cmd.ack(ctx, a) },
  'claim-next': {
    args: '',
    summary: 'claim the most urgent open task you may take',
    options: { types: { type: 'string' }, lease: { type: 'string' } },
    help: ['--types A,B     task types (payload.task_type)', '--lease S       lease length in seconds'],
    run: (ctx, v) => cmd.claimNext(ctx, { types: s(v.types), lease: s(v.lease) }),
  },
  done: {
    args: '<id>',
    summary: 'complete a claimed task; --result sends its result to the task\'s sender in the thread',
    options: { result: { type: 'string' }, failed: { type: 'boolean' } },
    help: ['--result JSON   the result (a reply signal in the task\'s thread)', '--failed        release it instead (back to pending)'],
    run: (ctx, v, a) => cmd.done(ctx, a[0], { result: s(v.result), failed: v.failed === true }),
  },
  reserve: {
    args: '<glob...>',
    summary: 'reserve path globs before editing (exit 3 when some conflict)',
    options: { project: { type: 'string' }, ttl: { type: 'string' }, shared: { type: 'boolean' }, reason: { type: 'string' } },
    help: ['--project P     project (default: the org)', '--ttl S         seconds to hold them', '--shared        a shared reservation', '--reason TEXT   shown to whoever collides'],
    run: (ctx, v, a) => cmd.reserve(ctx, a, { project: s(v.project), ttl: s(v.ttl), shared: v.shared === true, reason: s(v.reason) }),
  },
  release: {
    args: '[id...]',
    summary: 'release reservations (default: every one you hold)',
    options: { project: { type: 'string' } },
    help: ['--project P     only that project\'s'],
    run: (ctx, v, a) => cmd.release(ctx, a, { project: s(v.project) }),
  },
  wait: {
    args: '',
    summary: 'block until something new arrives for you (exit 0), or the timeout passes (exit 124)',
    options: { types: { type: 'string' }, timeout: { type: 'string' }, verbose: { type: 'boolean' } },
    help: ['--types A,B     only these signal types', '--timeout S     give up after S seconds (exit 124)', '--verbose       say on stderr once listening'],
    run: async (ctx, v) => {
      const t = cmd.joined(ctx);
      const timeoutS = v.timeout === undefined ? undefined : Number(v.timeout);
      if (timeoutS !== undefined && !(timeoutS > 0)) throw usage('--timeout must be a positive number of seconds', 'VALIDATION_INVALID_TYPE');
      const identity_id = t.me ?? (await import('./http.js').then((h) => h.rpc(t, 'identity.whoami'))).identity.id;
      const types = s(v.types)?.split(',').map((x) => x.trim()).filter(Boolean);
      const items = await waitForItems({ url: t.url, key: t.key!, identity_id }, ctx.files, { types, timeoutS, verbose: v.verbose === true });
      if (!items) return 124;
      ctx.out(ctx.json ? JSON.stringify({ signals: items.map(compact) }) : items.map(signalLine).join('\n'));
    },
  },
  hooks: {
    args: 'install|uninstall',
    summary: "write (or remove) wake-up hooks in a coding agent's settings",
    options: { agent: { type: 'string' }, project: { type: 'string' } },
    help: ['--agent A       claude-code, codex or gemini', '--project DIR   the project\'s settings (default: the user\'s)'],
    run: async (ctx, v, a) => {
      const verb = a[0];
      if (verb !== 'install' && verb !== 'uninstall') throw usage('svc hooks needs install or uninstall');
      const agent = s(v.agent);
      agentOf(agent);
      const file = (verb === 'install' ? install : uninstall)(ctx.files, agent!, s(v.project));
      ctx.out(ctx.json ? JSON.stringify({ [verb === 'install' ? 'installed' : 'uninstalled']: file }) : `${verb === 'install' ? 'installed hooks in' : 'removed hooks from'} ${file}`);
    },
  },
  hook: {
    args: 'session-start|post-tool|stop',
    summary: 'one hook run, the agent\'s event JSON on stdin (what `svc hooks install` wires)',
    options: { agent: { type: 'string' } },
    help: ['--agent A       claude-code, codex or gemini'],
    run: async (ctx, v, a) => {
      const event = a[0] as HookEvent;
      if (!HOOK_EVENTS.includes(event)) throw usage(`svc hook needs one of ${HOOK_EVENTS.join(', ')}`);
      agentOf(s(v.agent));
      const input = await readStdin();
      const out = await runHook(ctx.files, s(v.agent)!, event, input, { ...(ctx.url ? { url: ctx.url } : {}), ...(ctx.key ? { key: ctx.key } : {}) });
      if (out) ctx.out(out);
    },
  },
  'mcp-config': {
    args: '',
    summary: 'print the MCP server entry for /mcp with your key, in a client\'s format',
    options: { agent: { type: 'string' }, tools: { type: 'string' } },
    help: ['--agent A       claude-code, codex, cursor or vscode', '--tools P       a tool profile: core, tasks, memory, reservations, all'],
    run: async (ctx, v) => {
      const t = cmd.joined(ctx);
      ctx.out(mcpConfig(s(v.agent), t.url, t.key!, s(v.tools)));
    },
  },
};

function topHelp(): string {
  const w = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  return [
    'svc: the agent coordination service from a shell or a coding agent',
    '',
    'usage: svc <command> [options]',
    '',
    'commands:',
    ...Object.entries(COMMANDS).map(([n, c]) => `  ${n.padEnd(w)}  ${c.summary}`),
    '',
    'options of every command:',
    ...GLOBAL_HELP.map((l) => `  ${l}`),
    '',
    'exit codes: 0 ok, 1 refused or unreachable, 2 usage, 3 reservation conflicts, 124 wait timed out',
    'svc <command> --help shows one command.',
  ].join('\n');
}

const commandHelp = (name: string, c: Command) =>
  [`usage: svc ${name}${c.args ? ' ' + c.args : ''} [options]`, '', c.summary, '', 'options:', ...[...(c.help ?? []), ...GLOBAL_HELP].map((l) => `  ${l}`)].join('\n');

/** The hook's event JSON; an agent that leaves stdin open gets a second, not the hook's whole timeout. */
async function readStdin(): Promise<unknown> {
  if (process.stdin.isTTY) return {};
  let text = '';
  const read = (async () => {
    for await (const chunk of process.stdin) text += chunk;
  })();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([read, new Promise((r) => (timer = setTimeout(r, 1000)))]);
  clearTimeout(timer);
  process.stdin.pause();
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}

/** Runs one command line; answers the exit code. */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [name, ...rest] = argv;
  const json = argv.includes('--json');
  const out = (text: string) => void process.stdout.write(text + '\n');
  try {
    if (!name || name === '--help' || name === '-h' || name === 'help') {
      out(topHelp());
      return 0;
    }
    const c = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
    if (!c) throw usage(`unknown command ${name}; svc --help lists them`, 'NOT_FOUND');
    let parsed;
    try {
      parsed = parseArgs({ args: rest, options: { ...GLOBAL, ...c.options }, allowPositionals: true, strict: true });
    } catch (e) {
      throw usage((e as Error).message, 'VALIDATION_INVALID_TYPE');
    }
    const v = parsed.values as Values;
    if (v.help) {
      out(commandHelp(name, c));
      return 0;
    }
    const ctx: cmd.Ctx = {
      files: new Files(configDir(env, s(v.config))),
      json: v.json === true,
      url: s(v.url) ?? (env.SVC_URL || undefined),
      key: s(v.key) ?? (env.SVC_KEY || undefined),
      out,
    };
    return (await c.run(ctx, v, parsed.positionals)) ?? 0;
  } catch (e) {
    const err = e instanceof CliError ? e : new CliError('INTERNAL_SERVER_ERROR', (e as Error)?.message ?? String(e));
    if (json) out(JSON.stringify({ error: { code: err.code, message: err.message, details: err.details } }));
    else process.stderr.write(`${err.code}: ${err.message.replace(/\s*\n\s*/g, ' ')}\n`);
    return err.exit;
  }
}
