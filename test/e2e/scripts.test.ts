/**
 * The operator scripts as child processes against a live server, on both backends: `npm run actors --`
 * list, show, send (an accepted event and a refused one), timers and history, as tables and as --json,
 * with --url/--key or SVC_URL/SVC_KEY; `npm run bootstrap` on a fresh instance prints a redeem command that
 * works and the invite's skill URL.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, childEnv, serversOn, type Started } from '../helpers/server.js';
import { emitOk, expectOk } from '../api/support.js';

const run = promisify(execFile);
const script = (name: string, args: string[], env: Record<string, string> = {}) => run(process.execPath, ['--import', 'tsx', `scripts/${name}.ts`, ...args], { env: childEnv({ SVC_URL: '', SVC_KEY: '', ...env }) });
/** A run expected to fail: its exit code and stderr. */
const failing = (name: string, args: string[], env: Record<string, string> = {}) =>
  script(name, args, env).then(
    () => {
      throw new Error(`${name} ${args.join(' ')} succeeded`);
    },
    (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
  );

describe.each(BACKENDS)('operator scripts on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Started;
  let root: Member;
  let worker: Member;
  let task: any;
  let flags: string[];

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    worker = await join(root.client, 'worker');
    task = await emitOk(root, { signal_type: 'task', content: 'inspect me', to_identity: worker.id });
    expectOk(await worker.client.post('/claim', { signal_id: task.id, lease_ms: 600_000 }));
    flags = ['--url', svc.url, '--key', root.key];
  });

  it('list: counts per kind and state, then the matching actors, as a table and as JSON', async () => {
    const { stdout } = await script('actors', ['list', '--kind', 'signal', '--state', 'leased', ...flags]);
    expect(stdout).toMatch(/^KIND\s+STATE\s+COUNT/m);
    expect(stdout).toMatch(/^signal\s+leased\s+1$/m);
    expect(stdout).toMatch(new RegExp(`^signal\\s+${task.id}\\s+leased\\s+2\\s`, 'm'));
    const json = JSON.parse((await script('actors', ['list', '--kind', 'signal', '--json', ...flags])).stdout);
    expect(json.counts.signal.leased).toBe(1);
    expect(json.actors.map((a: any) => a.id)).toEqual([task.id]);
  });

  it('show, timers and history read one actor; SVC_URL and SVC_KEY stand in for the flags', async () => {
    const env = { SVC_URL: svc.url, SVC_KEY: root.key };
    const shown = (await script('actors', ['show', 'signal', task.id], env)).stdout;
    expect(shown).toContain(`signal ${task.id}`);
    expect(shown).toMatch(/^state\s+leased$/m);
    expect(shown).toMatch(/^LEASE_EXPIRED\s+\d{4}-/m);
    const json = JSON.parse((await script('actors', ['show', 'signal', task.id, '--json'], env)).stdout);
    expect(json).toMatchObject({ kind: 'signal', id: task.id, state: 'leased', version: 2, context: { claimed_by: worker.id } });
    const timers = JSON.parse((await script('actors', ['timers', 'signal', task.id, '--json'], env)).stdout);
    expect(timers).toEqual([{ event: 'LEASE_EXPIRED', at: json.context.claim_expires_at }]);
    const history = (await script('actors', ['history', 'signal', task.id], env)).stdout.trim().split('\n');
    expect(history[0]).toMatch(/^AT\s+EVENT\s+FROM\s+TO\s+REQUEST_ID$/);
    expect(history.slice(1)).toEqual([expect.stringMatching(/^\S+\s+CLAIM\s+pending\s+leased\s+req_\w+$/), expect.stringMatching(/^\S+\s+create\s+-\s+pending\s+req_\w+$/)]);
  });

  it('send: an accepted event moves the actor; a refused one exits 1 with the rule code', async () => {
    const refused = await failing('actors', ['send', 'signal', task.id, 'CLAIM', JSON.stringify({ identity: root.id, lease_ms: 1000 }), ...flags]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^SIGNAL_CLAIM_CONFLICT: /);
    const { stdout } = await script('actors', ['send', 'signal', task.id, 'ACK', JSON.stringify({ identity: worker.id }), ...flags]);
    expect(stdout.trim()).toBe(`signal ${task.id}: leased -> acked (version 3)`);
    expect(expectOk(await worker.client.get(`/thread/${task.id}`)).signals[0].delivery_state).toBe('acked');
    const member = await failing('actors', ['show', 'signal', task.id, '--url', svc.url, '--key', worker.key]);
    expect(member).toMatchObject({ code: 1, stderr: expect.stringMatching(/^AUTH_ADMIN_REQUIRED: /) });
    expect((await failing('actors', ['show', 'signal', ...flags])).code).toBe(2);
    expect((await failing('actors', ['frobnicate', ...flags])).stderr).toContain('unknown command frobnicate');
  });

  it('bootstrap: the first invite of a fresh instance, its redeem command and skill URL', async () => {
    const fresh = await servers.start();
    const { stdout } = await script('bootstrap', ['--url', fresh.url, '--name', 'ops-admin']);
    const code = /First invite for ops-admin \(human, admin\): (\S+)/.exec(stdout)?.[1];
    expect(code).toBeDefined();
    expect(stdout).toContain(`${fresh.url}/invite/${code}/skill`);
    const redeem = /-d '(\{.*\})'/.exec(stdout)![1];
    const red = await new Client(fresh.url).post('/invite', JSON.parse(redeem));
    const admin = expectOk(red, 201);
    expect(admin.identity).toMatchObject({ name: 'ops-admin', is_admin: true });
    // a second bootstrap is refused: the instance has an admin now
    const again = await failing('bootstrap', ['--url', fresh.url]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^[A-Z_]+: /);
  });
});
