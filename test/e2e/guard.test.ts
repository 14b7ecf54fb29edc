/**
 * The git guard in a real git repository the test creates, against a running service: installed with
 * `npm run guard -- install`, its pre-commit hook refuses a commit touching another identity's exclusive
 * reservation (naming path, holder and expiry), allows the holder's own and shared ones, only warns with
 * SVC_GUARD_MODE=warn, and allows (or with SVC_GUARD_FAIL_CLOSED=true refuses) when the service is down;
 * the pre-push hook checks the pushed paths.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join as joinMember, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectOk } from '../api/support.js';

describe.each(BACKENDS)('git guard on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let me: Member;
  let other: Member;
  let repo: string;
  let remote: string;
  let held: any;

  /** asynchronous: the service runs in this process, so a blocking spawn would stall the hook's requests */
  const run = (cmd: string, args: string[], env: Record<string, string> = {}) =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const p = spawn(cmd, args, { cwd: repo, env: { ...process.env, ...env } });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d) => (stdout += d));
      p.stderr.on('data', (d) => (stderr += d));
      p.on('close', (status) => resolve({ status, stdout, stderr }));
    });
  const git = (...args: string[]) => {
    const r = spawnSync('git', args, { cwd: repo, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const change = (path: string) => {
    mkdirSync(join(repo, path, '..'), { recursive: true });
    writeFileSync(join(repo, path), `${path} ${Math.random()}\n`);
    git('add', path);
  };
  const commit = async (env: Record<string, string> = {}) => run('git', ['commit', '-q', '-m', 'change'], env);

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    me = await joinMember(root.client, 'committer');
    other = await joinMember(root.client, 'holder');
    repo = mkdtempSync(join(tmpdir(), 'guard-repo-'));
    remote = mkdtempSync(join(tmpdir(), 'guard-remote-'));
    spawnSync('git', ['init', '-q', '--bare', remote]);
    git('init', '-q');
    git('config', 'user.email', 'agent@example.com');
    git('config', 'user.name', 'agent');
    git('remote', 'add', 'origin', remote);
    const installed = spawnSync('npm', ['run', '-s', 'guard', '--', 'install', '--repo', repo, '--url', svc.url, '--key', me.key], { cwd: process.cwd(), encoding: 'utf8' });
    // (blocking is fine here: the install makes no request to the service)
    expect(installed.status, installed.stderr).toBe(0);
    expect(installed.stdout).toContain('pre-commit');
    held = expectOk(await other.client.post('/reservations', { paths: ['src/core/**'], reason: 'rewriting core' })).granted[0];
    expectOk(await other.client.post('/reservations', { paths: ['docs/**'], exclusive: false }));
    expectOk(await me.client.post('/reservations', { paths: ['src/mine/**'] }));
  });
  afterAll(() => {
    for (const d of [repo, remote]) if (d) rmSync(d, { recursive: true, force: true });
  });

  it('refuses a commit touching another identity\'s exclusive reservation, naming path, holder and expiry', async () => {
    change('src/core/engine.ts');
    const r = await commit();
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('src/core/engine.ts');
    expect(r.stderr).toContain(other.id);
    expect(r.stderr).toContain(held.expires_at);
    expect(r.stderr).toContain('rewriting core');
    git('reset', '-q');
  });

  it('allows the holder\'s own reservations, shared ones and unreserved paths', async () => {
    change('src/mine/a.ts');
    change('docs/guide.md');
    change('README.md');
    const r = await commit();
    expect(r.status, r.stderr).toBe(0);
  });

  it('SVC_GUARD_MODE=warn warns and allows', async () => {
    change('src/core/warned.ts');
    const r = await commit({ SVC_GUARD_MODE: 'warn' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain('src/core/warned.ts');
    expect(r.stderr).toContain('SVC_GUARD_MODE=warn');
  });

  it('pre-push refuses pushing commits that touch another identity\'s reservation', async () => {
    const r = await run('git', ['push', '-q', 'origin', 'HEAD:refs/heads/main']);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('src/core/warned.ts');
  });

  it('an unreachable service warns and allows; SVC_GUARD_FAIL_CLOSED=true refuses', async () => {
    git('config', 'svc-guard.url', 'http://127.0.0.1:9');
    change('src/core/offline.ts');
    const closed = await commit({ SVC_GUARD_FAIL_CLOSED: 'true' });
    expect(closed.status).not.toBe(0);
    expect(closed.stderr).toContain('unreachable');
    const open = await commit();
    expect(open.status, open.stderr).toBe(0);
    expect(open.stderr).toContain('unreachable');
  });
});
