/**
 * Wake-ups through coding agents' own hooks (docs/agents.md). `svc hooks install` writes three entries into
 * the agent's hook configuration, each running `svc hook <event>`; a hook run makes one HTTP call, says
 * nothing when there is nothing new or the service cannot be reached, and answers in its agent's JSON.
 */
import { existsSync, mkdirSync, readFileSync, realpathSync, rmdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { call, rpc, usage, type Target } from './http.js';
import { firstLine, signalLine, type SignalLike } from './format.js';
import { writePrivate, type Credentials, type Files } from './files.js';

export const HOOK_EVENTS = ['session-start', 'post-tool', 'stop'] as const;
export type HookEvent = (typeof HOOK_EVENTS)[number];

interface Agent {
  /** the settings file: the project's with --project, else the user's */
  file(project: string | undefined, home: string): string;
  /** each hook event's name in this agent */
  events: Record<HookEvent, string>;
  /** the hook timeout as this agent counts it */
  timeout: number;
  /** extra fields of one hook handler */
  extra?(event: HookEvent): Record<string, unknown>;
  /** the stop answer that keeps the agent going with `reason` as its next prompt */
  block(reason: string): Record<string, unknown>;
}

/** seconds an agent gives a hook run; one HTTP call of at most HOOK_CALL_MS fits well inside it */
const TIMEOUT_S = 10;
const HOOK_CALL_MS = 3000;

export const AGENTS: Record<string, Agent> = {
  // code.claude.com/docs/en/hooks: settings.json "hooks" → event → [{matcher?, hooks: [{type, command, timeout (s)}]}]
  'claude-code': {
    file: (p, home) => join(p ?? home, '.claude', 'settings.json'),
    events: { 'session-start': 'SessionStart', 'post-tool': 'PostToolUse', stop: 'Stop' },
    timeout: TIMEOUT_S,
    block: (reason) => ({ decision: 'block', reason }),
  },
  // developers.openai.com/codex/hooks: hooks.json beside the config layer, the same shape as Claude Code's
  codex: {
    file: (p, home) => join(p ?? home, '.codex', 'hooks.json'),
    events: { 'session-start': 'SessionStart', 'post-tool': 'PostToolUse', stop: 'Stop' },
    timeout: TIMEOUT_S,
    block: (reason) => ({ decision: 'block', reason }),
  },
  // geminicli.com/docs/hooks/reference: settings.json "hooks" → event → [{matcher?, hooks: [{type, command, name, timeout (ms)}]}]
  gemini: {
    file: (p, home) => join(p ?? home, '.gemini', 'settings.json'),
    events: { 'session-start': 'SessionStart', 'post-tool': 'AfterTool', stop: 'AfterAgent' },
    timeout: TIMEOUT_S * 1000,
    extra: (event) => ({ name: `svc-${event}` }),
    // AfterAgent: "deny" rejects the turn's end and sends `reason` to the agent as a new prompt
    block: (reason) => ({ decision: 'deny', reason }),
  },
};

export function agentOf(name: string | undefined): Agent {
  if (!name) throw usage(`--agent is required: ${Object.keys(AGENTS).join(', ')}`);
  const a = AGENTS[name];
  if (!a) throw usage(`unknown agent ${name}: ${Object.keys(AGENTS).join(', ')}`, 'VALIDATION_INVALID_TYPE');
  return a;
}

/** the script this process was started as (bin/svc.js, through any npx link): what the hooks run again */
const bin = () => {
  try {
    return realpathSync(process.argv[1]);
  } catch {
    return resolve(dirname(fileURLToPath(import.meta.url)), '../../bin/svc.js');
  }
};
const sh = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);
/** what a hook entry of ours runs; recognised again by `isOurs` */
const command = (event: HookEvent, agent: string, configDir: string) => [process.execPath, bin(), 'hook', event, '--agent', agent, '--config', configDir].map(sh).join(' ');
const isOurs = (cmd: unknown) => typeof cmd === 'string' && / hook (session-start|post-tool|stop) --agent /.test(cmd) && cmd.includes('svc');

/** What install found and wrote, per settings file, so uninstall can put back the very bytes it found. */
interface Installed {
  before: string | null;
  after: string;
  created_dirs: string[];
}
type Ledger = Record<string, Installed>;
const ledgerFile = (files: Files) => join(files.dir, 'hooks-installed.json');
const readLedger = (files: Files): Ledger => {
  try {
    return JSON.parse(readFileSync(ledgerFile(files), 'utf8'));
  } catch {
    return {};
  }
};

export function install(files: Files, agentName: string, project: string | undefined, home = homedir()): string {
  const agent = agentOf(agentName);
  const file = resolve(agent.file(project, home));
  const before = existsSync(file) ? readFileSync(file, 'utf8') : null;
  const settings = before === null ? {} : parseSettings(before, file);
  settings.hooks ??= {};
  for (const event of HOOK_EVENTS) {
    const name = agent.events[event];
    const groups: any[] = (settings.hooks[name] ??= []);
    if (groups.some((g) => g?.hooks?.some((h: any) => isOurs(h?.command)))) continue;
    groups.push({ hooks: [{ type: 'command', command: command(event, agentName, files.dir), timeout: agent.timeout, ...agent.extra?.(event) }] });
  }
  const after = JSON.stringify(settings, null, 2) + '\n';
  if (after === before) return file;
  const created_dirs = missingDirs(dirname(file));
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, after);
  const ledger = readLedger(files);
  // installing again over our own entries keeps the first record of what was there
  ledger[file] = ledger[file] && ledger[file].after === before ? { ...ledger[file], after } : { before, after, created_dirs };
  writePrivate(ledgerFile(files), ledger, files.dir);
  return file;
}

/** Removes exactly what install added: the bytes found before when the file is as install left it, else our entries only. */
export function uninstall(files: Files, agentName: string, project: string | undefined, home = homedir()): string {
  const file = resolve(agentOf(agentName).file(project, home));
  const ledger = readLedger(files);
  const rec = ledger[file];
  const now = existsSync(file) ? readFileSync(file, 'utf8') : null;
  if (rec && now === rec.after) {
    if (rec.before === null) {
      unlinkSync(file);
      for (const d of rec.created_dirs) {
        try {
          rmdirSync(d);
        } catch {
          // not empty any more: something else lives there now
        }
      }
    } else writeFileSync(file, rec.before);
  } else if (now !== null) {
    const settings = parseSettings(now, file);
    for (const [name, groups] of Object.entries<any>(settings.hooks ?? {})) {
      if (!Array.isArray(groups)) continue;
      const kept = groups.filter((g) => !g?.hooks?.some((h: any) => isOurs(h?.command)));
      if (kept.length) settings.hooks[name] = kept;
      else delete settings.hooks[name];
    }
    if (settings.hooks && !Object.keys(settings.hooks).length) delete settings.hooks;
    writeFileSync(file, JSON.stringify(settings, null, 2) + '\n');
  }
  delete ledger[file];
  writePrivate(ledgerFile(files), ledger, files.dir);
  return file;
}

function parseSettings(text: string, file: string): any {
  try {
    const v = JSON.parse(text);
    if (v && typeof v === 'object' && !Array.isArray(v)) return v;
  } catch {
    // reported below
  }
  throw usage(`${file} is not a JSON object; fix or move it first`, 'VALIDATION_INVALID_TYPE');
}

/** the directories mkdir -p would create for `dir`, deepest first (uninstall removes them again) */
function missingDirs(dir: string): string[] {
  const out: string[] = [];
  for (let d = dir; !existsSync(d); d = dirname(d)) out.push(d);
  return out;
}

type Item = SignalLike & { claimed_by?: string | null };

const untaken = (s: Item) => s.signal_type === 'task' && (s.task_status ?? 'open') === 'open' && !s.claimed_by;

/**
 * One hook run. Answers the text to print (often nothing). Never throws: a hook that cannot reach the
 * service, or has no credentials, lets the agent carry on and says nothing.
 */
export async function runHook(files: Files, agentName: string, event: HookEvent, input: any, override: Partial<Target> = {}): Promise<string> {
  const agent = agentOf(agentName);
  const creds = files.credentials();
  if (!creds && !override.key) return '';
  const c = { ...creds, ...override } as Credentials;
  const t: Target = { url: c.url.replace(/\/+$/, ''), key: c.key, timeoutMs: HOOK_CALL_MS };
  try {
    if (event === 'session-start') return context(agent, event, await sessionStart(files, t, c));
    if (event === 'post-tool') return context(agent, event, await postTool(files, t, c));
    if (input?.stop_hook_active === true) return '';
    const reason = await stop(files, t, c);
    return reason ? JSON.stringify(agent.block(reason)) : '';
  } catch {
    return '';
  }
}

const context = (agent: Agent, event: HookEvent, text: string | undefined) =>
  text ? JSON.stringify({ hookSpecificOutput: { hookEventName: agent.events[event], additionalContext: text } }) : '';

const bullet = (s: Item) => `- ${signalLine(s)}`;

async function sessionStart(files: Files, t: Target, c: Credentials): Promise<string> {
  const r = await rpc(t, 'workflow.resume');
  const names = (xs: { name: string }[]) => xs.map((x) => x.name).join(', ');
  const top: Item[] = r.inbox.top;
  files.markSeen(top.map((s) => s.id));
  return [
    `You are ${r.identity.name} (identity ${r.identity.id}) on the agent coordination service ${t.url}.` +
      (r.roles.length ? ` Roles: ${names(r.roles)}.` : '') +
      (r.rings.length ? ` Rings: ${names(r.rings)}.` : ''),
    ...(r.tasks.length ? [`Tasks you hold:`, ...r.tasks.map((h: any) => `${bullet(h.signal)} (lease ends ${h.lease_ends_at})`)] : []),
    r.inbox.unread ? `Waiting for you: ${r.inbox.unread}${r.inbox.unread_complete ? '' : '+'} unread.` : 'Nothing unread is waiting for you.',
    ...top.map(bullet),
    'Commands: `svc inbox --unread`, `svc ack <id>`, `svc claim-next`, `svc done <id> [--result JSON]`, `svc send --to <identity id> <text>`, `svc wait --timeout 60`.',
  ].join('\n');
}

async function unread(t: Target, me: string): Promise<Item[]> {
  const page = await call(t, 'GET', `/inbox/identity/${encodeURIComponent(me)}?receipt_state=unread&limit=50`);
  return (page.signals as Item[]).filter((s) => s.from_identity !== me);
}

/** New direct signals and untaken tasks since the last nudge, each once. */
async function postTool(files: Files, t: Target, c: Credentials): Promise<string | undefined> {
  const items = (await unread(t, c.identity_id)).filter((s) => s.to_identity === c.identity_id || untaken(s));
  const fresh = new Set(files.markSeen(items.map((s) => s.id)));
  const shown = items.filter((s) => fresh.has(s.id));
  if (!shown.length) return undefined;
  return [`New for you on the coordination service (${shown.length}):`, ...shown.map(bullet), 'Read: `svc inbox --unread`; acknowledge: `svc ack <id>`; take a task: `svc claim-next`.'].join('\n');
}

/** The summary a stop is blocked with: unacknowledged direct items, once per set of them. */
async function stop(files: Files, t: Target, c: Credentials): Promise<string | undefined> {
  const direct = (await unread(t, c.identity_id)).filter((s) => s.to_identity === c.identity_id);
  const state = files.state();
  const ids = direct.map((s) => s.id);
  const blockedBefore = new Set(state.stop_blocked);
  if (ids.every((id) => blockedBefore.has(id))) {
    if (!ids.length && state.stop_blocked.length) files.saveState({ ...state, stop_blocked: [] });
    return undefined;
  }
  files.saveState({ ...state, stop_blocked: ids, seen: [...state.seen, ...ids.filter((id) => !state.seen.includes(id))] });
  return [
    `Before you stop: ${ids.length} direct message(s) to you on the coordination service are not acknowledged:`,
    ...direct.slice(0, 10).map((s) => `- ${s.id} from ${s.from_identity ?? '-'}: ${firstLine(s.content)}`),
    'Answer (`svc send --to <sender> --parent <id> <text>`) or acknowledge (`svc ack <id>`) them, then stop.',
  ].join('\n');
}
