#!/usr/bin/env node
/**
 * The git guard's hook (installed by `npm run guard -- install`): sends the staged (pre-commit) or pushed
 * (pre-push) paths to GET /reservations/conflicts and refuses when another identity holds an exclusive
 * reservation on one. Plain Node (no dependencies), so it runs in any repository.
 * SVC_GUARD_MODE=warn only warns; an unreachable service warns and allows unless SVC_GUARD_FAIL_CLOSED=true.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const git = (...args) => execFileSync('git', args, { encoding: 'utf8' });
const config = (name) => {
  try {
    return git('config', '--get', name).trim();
  } catch {
    return '';
  }
};
const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';
const ZERO = /^0+$/;

function stagedPaths() {
  return git('diff', '--cached', '--name-only', '-z').split('\0').filter(Boolean);
}

function pushedPaths() {
  const out = new Set();
  for (const line of readFileSync(0, 'utf8').split('\n').filter(Boolean)) {
    const [, localSha, , remoteSha] = line.split(' ');
    if (ZERO.test(localSha)) continue; // a deleted ref pushes no paths
    const base = ZERO.test(remoteSha) ? EMPTY_TREE : remoteSha;
    for (const p of git('diff', '--name-only', '-z', base, localSha).split('\0').filter(Boolean)) out.add(p);
  }
  return [...out];
}

async function conflicts(url, key, project, paths) {
  const found = [];
  // the query is a comma list: keep each request's URL short
  for (let i = 0; i < paths.length; i += 50) {
    const q = new URLSearchParams({ paths: paths.slice(i, i + 50).join(','), exclusive: 'false' });
    if (project) q.set('project', project);
    const res = await fetch(`${url}/reservations/conflicts?${q}`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(5000) });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(`${res.status} ${body?.error?.code ?? ''} ${body?.error?.message ?? ''}`.trim());
    found.push(...body.data.conflicts);
  }
  return found;
}

async function main() {
  const hook = process.argv[2];
  const url = (process.env.SVC_GUARD_URL || config('svc-guard.url')).replace(/\/+$/, '');
  const key = process.env.SVC_GUARD_KEY || config('svc-guard.key');
  const project = process.env.SVC_GUARD_PROJECT || config('svc-guard.project');
  const warnOnly = (process.env.SVC_GUARD_MODE || 'block') === 'warn';
  const failClosed = process.env.SVC_GUARD_FAIL_CLOSED === 'true';
  const paths = hook === 'pre-push' ? pushedPaths() : stagedPaths();
  if (!paths.length) return 0;
  let hits;
  try {
    hits = await conflicts(url, key, project, paths);
  } catch (e) {
    console.error(`svc-guard: reservation service unreachable (${e.message ?? e}); ${failClosed ? 'refusing (SVC_GUARD_FAIL_CLOSED=true)' : 'allowing'}`);
    return failClosed ? 1 : 0;
  }
  const blocking = hits.filter((c) => c.reservation.exclusive);
  if (!blocking.length) return 0;
  for (const c of blocking) console.error(`svc-guard: ${c.path} is reserved by ${c.reservation.identity} (${c.reservation.path}) until ${c.reservation.expires_at}${c.reservation.reason ? `: ${c.reservation.reason}` : ''}`);
  if (warnOnly) {
    console.error('svc-guard: SVC_GUARD_MODE=warn, allowing');
    return 0;
  }
  console.error(`svc-guard: ${hook} refused; coordinate with the holder or wait for the reservation to end`);
  return 1;
}

main().then((code) => process.exit(code), (e) => {
  console.error(`svc-guard: ${e?.message ?? e}`);
  process.exit(process.env.SVC_GUARD_FAIL_CLOSED === 'true' ? 1 : 0);
});
