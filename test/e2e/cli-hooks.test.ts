/**
 * `svc hook` and `svc hooks install|uninstall` (docs/agents.md): each agent's recorded hook input
 * (test/fixtures/hooks/) on stdin, the answer checked against that agent's documented output; a stop blocked
 * once and then let go; a service that does not answer costs the agent nothing but a quick, silent exit;
 * install then uninstall leaves the settings file byte-identical, and the installed command itself works.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join as pathJoin } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, type Member } from '../helpers/client.js';
import { cliUser, type CliUser } from '../helpers/cli.js';
import { BACKENDS, childEnv, serversOn, type Started } from '../helpers/server.js';
import { emitOk, expectOk } from '../api/support.js';

const AGENTS = ['claude-code', 'codex', 'gemini'] as const;
type AgentName = (typeof AGENTS)[number];
const fixture = (agent: AgentName, event: string) => readFileSync(`test/fixtures/hooks/${agent}/${event}.json`, 'utf8');

/** each agent's event names and stop answer (code.claude.com/docs/en/hooks, developers.openai.com/codex/hooks, geminicli.com/docs/hooks/reference) */
const SHAPES: Record<AgentName, { start: string; tool: string; block: string }> = {
  'claude-code': { start: 'SessionStart', tool: 'PostToolUse', block: 'block' },
  codex: { start: 'SessionStart', tool: 'PostToolUse', block: 'block' },
  gemini: { start: 'SessionStart', tool: 'AfterTool', block: 'deny' },
};

/** `{hookSpecificOutput: {hookEventName, additionalContext}}` and nothing else: the context-adding answer of all three */
function contextOf(stdout: string, eventName: string): string {
  const out = JSON.parse(stdout);
  expect(out).toEqual({ hookSpecificOutput: { hookEventName: eventName, additionalContext: expect.any(String) } });
  return out.hookSpecificOutput.additionalContext;
}

describe.each(BACKENDS)('svc hook on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Started;
  let root: Member;
  const users = {} as Record<AgentName, { cli: CliUser; id: string }>;

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    await Promise.all(
      AGENTS.map(async (agent) => {
        const cli = await cliUser();
        const code = expectOk(await root.client.post('/invite/create', { name: `${agent}-bot`, type: 'agent' }), 201).code;
        const r = await cli.run(['join', `${svc.url}/invite/${code}`, '--json']);
        expect(r.code, r.stderr).toBe(0);
        users[agent] = { cli, id: JSON.parse(r.stdout).identity.id };
      }),
    );
  });

  it.each(AGENTS)('%s: session start says who the agent is and what waits; a tool call adds each new item once; a stop is blocked once', async (agent) => {
    const { cli, id } = users[agent];
    const shape = SHAPES[agent];
    const hook = (event: string, input: string) => cli.run(['hook', event, '--agent', agent], { input });
    const waiting = await emitOk(root, { signal_type: 'query', content: 'what did you change?', to_identity: id });

    const start = await hook('session-start', fixture(agent, 'session-start'));
    expect(start.code, start.stderr).toBe(0);
    const told = contextOf(start.stdout, shape.start);
    expect(told).toContain(`${agent}-bot (identity ${id})`);
    expect(told).toContain('Waiting for you: 1 unread');
    expect(told).toContain(waiting.id);

    // the session start showed `waiting`: a tool call adds only what came after
    const task = await emitOk(root, { signal_type: 'task', content: 'review PR 12\nlong body', to_identity: id });
    const tool = await hook('post-tool', fixture(agent, 'post-tool'));
    const added = contextOf(tool.stdout, shape.tool);
    expect(added).toContain(task.id);
    expect(added).toContain('review PR 12');
    expect(added).not.toContain('long body');
    expect(added).not.toContain(waiting.id);
    const again = await hook('post-tool', fixture(agent, 'post-tool'));
    expect(again).toMatchObject({ code: 0, stdout: '' });

    const stop = await hook('stop', fixture(agent, 'stop'));
    const blocked = JSON.parse(stop.stdout);
    expect(blocked).toEqual({ decision: shape.block, reason: expect.stringMatching(/\S/) });
    expect(blocked.reason).toContain(waiting.id);
    expect(blocked.reason).toContain(task.id);
    // the agent's loop guard, then the same items again: the stop goes through both times
    const active = JSON.stringify({ ...JSON.parse(fixture(agent, 'stop')), stop_hook_active: true });
    expect(await hook('stop', active)).toMatchObject({ code: 0, stdout: '' });
    expect(await hook('stop', fixture(agent, 'stop'))).toMatchObject({ code: 0, stdout: '' });
    // acknowledged, nothing holds the stop
    expect((await cli.run(['ack', waiting.id, task.id])).code).toBe(0);
    expect(await hook('stop', fixture(agent, 'stop'))).toMatchObject({ code: 0, stdout: '' });
  }, 180_000);
});

describe('svc hook with the service down', () => {
  let hung: Server;
  const held: Socket[] = [];
  let closedPort: number;

  beforeAll(async () => {
    // a service that accepts connections and never answers: the worst case for a hook's deadline
    hung = createServer((s) => void held.push(s));
    await new Promise<void>((r) => hung.listen(0, '127.0.0.1', r));
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    closedPort = (probe.address() as { port: number }).port;
    await new Promise((r) => probe.close(r));
  });
  afterAll(async () => {
    held.forEach((s) => s.destroy());
    await new Promise((r) => hung.close(r));
  });

  it.each(AGENTS)('%s: every hook finishes well inside its timeout, silently and with exit 0', async (agent) => {
    const cli = await cliUser();
    const hungUrl = `http://127.0.0.1:${(hung.address() as { port: number }).port}`;
    // one at a time: each run's time is its own, not the machine's
    for (const event of ['session-start', 'post-tool', 'stop'] as const) for (const url of agent === 'claude-code' ? [hungUrl, `http://127.0.0.1:${closedPort}`] : [hungUrl]) {
      const r = await cli.run(['hook', event, '--agent', agent, '--url', url, '--key', 'svc_whatever'], { input: fixture(agent, event) });
      expect(r).toMatchObject({ code: 0, stdout: '', stderr: '' });
      // the hook's own timeout is 10 s; one call is cut off at 3 s
      expect(r.ms).toBeLessThan(10_000);
    }
  }, 120_000);
});

describe('svc hooks install and uninstall', () => {
  const existing: Record<AgentName, [string, string]> = {
    'claude-code': ['.claude/settings.json', '{\n\t"model": "opus",\n\t"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}]}\n}'],
    codex: ['.codex/hooks.json', '{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"echo bye"}]}]}}'],
    gemini: ['.gemini/settings.json', '{\n  "theme": "GitHub",   "hooks": {}\n}\n'],
  };

  it.each(AGENTS)('%s: install writes the three hooks beside what was there; uninstall puts back the very bytes', async (agent) => {
    const cli = await cliUser();
    const project = await mkdtemp(pathJoin(tmpdir(), 'svc-project-'));
    const [rel, text] = existing[agent];
    const file = pathJoin(project, rel);
    await mkdir(pathJoin(file, '..'), { recursive: true });
    await writeFile(file, text);

    const inst = await cli.run(['hooks', 'install', '--agent', agent, '--project', project]);
    expect(inst.code, inst.stderr).toBe(0);
    expect(inst.stdout).toBe(`installed hooks in ${file}\n`);
    const settings = JSON.parse(await readFile(file, 'utf8'));
    const shape = SHAPES[agent];
    const stopEvent = agent === 'gemini' ? 'AfterAgent' : 'Stop';
    for (const [event, name] of [[shape.start, 'session-start'], [shape.tool, 'post-tool'], [stopEvent, 'stop']]) {
      const ours = settings.hooks[event].at(-1).hooks[0];
      expect(ours).toMatchObject({ type: 'command', timeout: agent === 'gemini' ? 10_000 : 10 });
      expect(ours.command).toContain(` hook ${name} --agent ${agent} --config ${cli.configDir}`);
    }
    // what was there stays
    if (agent === 'claude-code') expect(settings.hooks.PreToolUse[0].hooks[0].command).toBe('./guard.sh');
    if (agent === 'codex') expect(settings.hooks.Stop[0].hooks[0].command).toBe('echo bye');
    // installing twice adds nothing
    await cli.run(['hooks', 'install', '--agent', agent, '--project', project]);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual(settings);

    const un = await cli.run(['hooks', 'uninstall', '--agent', agent, '--project', project]);
    expect(un.code, un.stderr).toBe(0);
    expect(await readFile(file, 'utf8')).toBe(text);
  });

  it('a settings file that was not there is not there after uninstall, its folder neither; the installed command runs', async () => {
    const cli = await cliUser();
    const project = await mkdtemp(pathJoin(tmpdir(), 'svc-project-'));
    expect((await cli.run(['hooks', 'install', '--agent', 'claude-code', '--project', project])).code).toBe(0);
    const file = pathJoin(project, '.claude', 'settings.json');
    const command = JSON.parse(await readFile(file, 'utf8')).hooks.Stop[0].hooks[0].command;
    // as Claude Code runs it: through a shell, the event on stdin; not joined, it says nothing
    const ran = await promisify(execFile)('sh', ['-c', `${command} < test/fixtures/hooks/claude-code/stop.json`], { env: childEnv(cli.env) });
    expect(ran).toMatchObject({ stdout: '', stderr: '' });
    expect((await cli.run(['hooks', 'uninstall', '--agent', 'claude-code', '--project', project])).code).toBe(0);
    expect(existsSync(file)).toBe(false);
    expect(existsSync(pathJoin(project, '.claude'))).toBe(false);
    const bad = await cli.run(['hooks', 'install', '--agent', 'cursor', '--project', project]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^VALIDATION_INVALID_TYPE: unknown agent cursor/);
    // a hook run names an event the wiring knows: anything else is a usage error, not a silent run
    const odd = await cli.run(['hook', 'pre-commit', '--agent', 'claude-code'], { input: '{}' });
    expect(odd.code).toBe(2);
    expect(odd.stderr).toMatch(/^VALIDATION_FIELD_REQUIRED: svc hook needs one of session-start, post-tool, stop/);
  });
});
