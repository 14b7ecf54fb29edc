/**
 * `svc`, the agent's command-line client, as its own process against a live server on both backends
 * (docs/agents.md): join from an invite URL, each subcommand's happy path and one refusal, `svc wait`
 * waking within 200 ms of an emit, showing nothing twice across three runs and exiting 124 on timeout;
 * `--help` for the whole and for every subcommand.
 */
import { statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join as pathJoin } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, type Member } from '../helpers/client.js';
import { cliUser, ERROR_LINE, type CliUser } from '../helpers/cli.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { emitOk, expectOk, waitFor } from '../api/support.js';

const SUBCOMMANDS = ['join', 'whoami', 'send', 'inbox', 'ack', 'claim-next', 'done', 'reserve', 'release', 'wait', 'hooks', 'hook', 'mcp-config'];

describe('svc --help', () => {
  it('lists every subcommand, and each subcommand has its own help', async () => {
    const u = await cliUser();
    const top = await u.run(['--help']);
    expect(top.code).toBe(0);
    for (const c of SUBCOMMANDS) expect(top.stdout).toMatch(new RegExp(`^  ${c}\\s`, 'm'));
    // a few at a time: each is a node process on a shared 2-core machine
    const helps = [];
    for (let i = 0; i < SUBCOMMANDS.length; i += 4) helps.push(...(await Promise.all(SUBCOMMANDS.slice(i, i + 4).map((c) => u.run([c, '--help'])))));
    helps.forEach((h, i) => {
      expect(h.code, SUBCOMMANDS[i]).toBe(0);
      expect(h.stdout).toMatch(new RegExp(`^usage: svc ${SUBCOMMANDS[i]}\\b`));
      expect(h.stdout).toContain('--json');
    });
    const unknown = await u.run(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^NOT_FOUND: unknown command frobnicate/);
  }, 180_000);
});

describe.each(BACKENDS)('svc on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Started;
  let root: Member;
  let agent: CliUser;
  let agentId: string;

  const invite = async (name: string) => expectOk(await root.client.post('/invite/create', { name, type: 'agent' }), 201).code as string;
  const fails = (r: { code: number | null; stderr: string }, exit: number, code: string) => {
    expect(r.code, r.stderr).toBe(exit);
    expect(r.stderr).toMatch(ERROR_LINE);
    expect(r.stderr.startsWith(`${code}: `), r.stderr).toBe(true);
  };

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    agent = await cliUser();
  });

  it('join: an invite URL redeems into a user-only key file; whoami reads it; a used invite is refused', async () => {
    const code = await invite('builder');
    // the line the invite's skill document gives, run as it says
    const skill = await (await fetch(`${svc.url}/invite/${code}/skill`)).text();
    const line = /^npx svc join (\S+)$/m.exec(skill);
    // the service names itself by BASE_URL (here http://localhost:<port>)
    expect(line?.[1]).toMatch(new RegExp(`^http://(localhost|127\\.0\\.0\\.1):${new URL(svc.url).port}/invite/${code}$`));
    const base = line![1].replace(/\/invite\/.*$/, '');
    expect(skill).toMatch(/^npx svc hooks install --agent claude-code/m);
    expect(skill).toMatch(/^npx svc mcp-config --agent claude-code/m);
    const joined = await agent.run(['join', line![1], '--json']);
    expect(joined.code, joined.stderr).toBe(0);
    const out = JSON.parse(joined.stdout);
    expect(out.identity.name).toBe('builder');
    agentId = out.identity.id;
    const file = pathJoin(agent.configDir, 'credentials.json');
    expect(out.credentials).toBe(file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ url: base, identity_id: agentId, name: 'builder' });

    const who = await agent.run(['whoami']);
    expect(who.stdout).toContain(`builder (${agentId}) on ${base}`);
    fails(await agent.run(['join', `${svc.url}/invite/${code}/skill`]), 1, 'INVITE_ALREADY_REDEEMED');
  });

  it('join --print prints the key and stores nothing; whoami without a key is AUTH_KEY_MISSING', async () => {
    const other = await cliUser();
    const code = await invite('printer');
    const printed = await other.run(['join', code, '--url', svc.url, '--print']);
    expect(printed.code, printed.stderr).toBe(0);
    expect(printed.stdout).toMatch(/^svc_\S+\n$/);
    expect(() => statSync(pathJoin(other.configDir, 'credentials.json'))).toThrow();
    fails(await other.run(['whoami']), 1, 'AUTH_KEY_MISSING');
    const withKey = await other.run(['whoami', '--json', '--url', svc.url, '--key', printed.stdout.trim()]);
    expect(JSON.parse(withKey.stdout).identity.name).toBe('printer');
  });

  it('send and inbox: a direct query to root arrives; an unknown target and a bad --limit are refused', async () => {
    const sent = await agent.run(['send', '--to', root.id, '--urgency', '0.7', 'is the build green?', '--json']);
    expect(sent.code, sent.stderr).toBe(0);
    const s = JSON.parse(sent.stdout);
    expect(s).toMatchObject({ signal_type: 'query', to_identity: root.id, from_identity: agentId, content: 'is the build green?' });
    fails(await agent.run(['send', '--to', 'nobody', 'hello']), 1, 'SIGNAL_NOT_FOUND');

    await emitOk(root, { signal_type: 'query', content: 'which branch?\nmore detail', to_identity: agentId });
    const box = await agent.run(['inbox', '--unread']);
    expect(box.code, box.stderr).toBe(0);
    expect(box.stdout).toMatch(new RegExp(`^\\S+  query u0\\.5  from ${root.id}  which branch\\?$`, 'm'));
    const json = JSON.parse((await agent.run(['inbox', '--unread', '--json'])).stdout);
    expect(json.signals[0]).toMatchObject({ signal_type: 'query', from_identity: root.id, content: 'which branch?', receipt_state: 'unread' });
    fails(await agent.run(['inbox', '--limit', '0']), 2, 'VALIDATION_INVALID_TYPE');
  });

  it('ack acknowledges an inbox item (it leaves --unread); an unknown id is refused', async () => {
    const q = await emitOk(root, { signal_type: 'query', content: 'ack me', to_identity: agentId });
    const acked = await agent.run(['ack', q.id]);
    expect(acked.code, acked.stderr).toBe(0);
    expect(acked.stdout).toBe(`acknowledged ${q.id}\n`);
    const unread = JSON.parse((await agent.run(['inbox', '--unread', '--json'])).stdout);
    expect(unread.signals.map((x: any) => x.id)).not.toContain(q.id);
    fails(await agent.run(['ack', '01JZZZZZZZZZZZZZZZZZZZZZZZ']), 1, 'SIGNAL_NOT_FOUND');
  });

  it('claim-next takes the open task; done --result completes it and replies to its sender; a second done is refused', async () => {
    const task = await emitOk(root, { signal_type: 'task', content: 'fix the parser', to_identity: agentId });
    const claimed = await agent.run(['claim-next', '--json']);
    expect(claimed.code, claimed.stderr).toBe(0);
    expect(JSON.parse(claimed.stdout).signal).toMatchObject({ id: task.id, claimed_by: agentId });
    expect((await agent.run(['claim-next'])).stdout).toBe('no open task to claim\n');
    fails(await agent.run(['claim-next', '--lease', 'soon']), 2, 'VALIDATION_INVALID_TYPE');

    const done = await agent.run(['done', task.id, '--result', '{"tests":"green"}', '--json']);
    expect(done.code, done.stderr).toBe(0);
    const d = JSON.parse(done.stdout);
    expect(d.signal).toMatchObject({ id: task.id, delivery_state: 'acked' });
    expect(d.result).toMatchObject({ parent_id: task.id, to_identity: root.id, payload: { result: { tests: 'green' }, task_id: task.id } });
    const again = await agent.run(['done', task.id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(ERROR_LINE);
  });

  it('reserve grants globs, exits 3 on a conflict; release frees every one held; an unknown id is refused', async () => {
    const r = await agent.run(['reserve', 'src/parser/**', 'docs/parser.md', '--reason', 'parser rewrite', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).granted.map((g: any) => g.path).sort()).toEqual(['docs/parser.md', 'src/parser/**']);
    expectOk(await root.client.post('/reservations', { paths: ['src/ui/**'] }));
    const clash = await agent.run(['reserve', 'src/ui/button.ts']);
    expect(clash.code).toBe(3);
    expect(clash.stdout).toMatch(new RegExp(`^conflict src/ui/button.ts: held by ${root.id} as src/ui/\\*\\*`, 'm'));
    fails(await agent.run(['reserve', 'x', '--ttl', '99999999']), 1, 'RESERVATION_VALIDATION_FAILED');

    const rel = await agent.run(['release', '--json']);
    expect(rel.code, rel.stderr).toBe(0);
    expect(JSON.parse(rel.stdout).map((x: any) => x.state)).toEqual(['released', 'released']);
    fails(await agent.run(['release', '01JZZZZZZZZZZZZZZZZZZZZZZZ']), 1, 'RESERVATION_NOT_FOUND');
  });

  it('wait returns within 200 ms of an emit addressed to the caller', async () => {
    const w = agent.start(['wait', '--timeout', '30', '--verbose', '--json']);
    await waitFor('svc wait listening', () => w.stderr(), (e) => e.includes('waiting as'), 30_000);
    const s = await emitOk(root, { signal_type: 'alert', content: 'deploy is red', to_identity: agentId });
    const emittedAt = Date.now();
    const run = await w.done;
    expect(run.code, run.stderr).toBe(0);
    expect(w.firstOutputAt()! - emittedAt).toBeLessThan(200);
    expect(JSON.parse(run.stdout).signals).toEqual([expect.objectContaining({ id: s.id, signal_type: 'alert', from_identity: root.id, content: 'deploy is red' })]);
  });

  it('wait across three runs: the backlog once, then only what is new, then nothing (exit 124 on timeout)', async () => {
    const a = await emitOk(root, { signal_type: 'query', content: 'first', to_identity: agentId });
    const b = await emitOk(root, { signal_type: 'task', content: 'second', to_identity: agentId });
    const mine = await emitOk(root, { signal_type: 'pulse', content: 'to everyone' });
    const one = await agent.run(['wait', '--timeout', '20', '--json']);
    expect(one.code, one.stderr).toBe(0);
    const ids1 = JSON.parse(one.stdout).signals.map((x: any) => x.id);
    expect(ids1).toEqual(expect.arrayContaining([a.id, b.id, mine.id]));

    const w = agent.start(['wait', '--timeout', '20', '--verbose', '--json']);
    await waitFor('second wait listening', () => w.stderr(), (e) => e.includes('waiting as'), 30_000);
    const c = await emitOk(root, { signal_type: 'query', content: 'third', to_identity: agentId });
    const two = await w.done;
    expect(two.code, two.stderr).toBe(0);
    expect(JSON.parse(two.stdout).signals.map((x: any) => x.id)).toEqual([c.id]);

    const three = await agent.run(['wait', '--timeout', '1']);
    expect(three.code).toBe(124);
    expect(three.stdout).toBe('');
    fails(await agent.run(['wait', '--timeout', '-1']), 2, 'VALIDATION_INVALID_TYPE');
  });

  it('mcp-config prints the /mcp entry with the key in each client\'s format; an unknown client is refused', async () => {
    const { key, url } = JSON.parse(await readFile(pathJoin(agent.configDir, 'credentials.json'), 'utf8'));
    const auth = `Bearer ${key}`;
    const claude = JSON.parse((await agent.run(['mcp-config', '--agent', 'claude-code', '--tools', 'core'])).stdout);
    expect(claude).toEqual({ mcpServers: { svc: { type: 'http', url: `${url}/mcp?tools=core`, headers: { Authorization: auth } } } });
    const cursor = JSON.parse((await agent.run(['mcp-config', '--agent', 'cursor'])).stdout);
    expect(cursor).toEqual({ mcpServers: { svc: { url: `${url}/mcp`, headers: { Authorization: auth } } } });
    const vscode = JSON.parse((await agent.run(['mcp-config', '--agent', 'vscode'])).stdout);
    expect(vscode).toEqual({ servers: { svc: { type: 'http', url: `${url}/mcp`, headers: { Authorization: auth } } } });
    const codex = (await agent.run(['mcp-config', '--agent', 'codex'])).stdout;
    expect(codex).toBe(`[mcp_servers.svc]\nurl = "${url}/mcp"\nhttp_headers = { "Authorization" = "${auth}" }\n`);
    fails(await agent.run(['mcp-config', '--agent', 'emacs']), 2, 'VALIDATION_INVALID_TYPE');
  });
});
