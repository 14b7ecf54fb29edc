/**
 * `npm run guard -- install --repo DIR --url URL --key KEY [--project P]`: installs the reservation guard's
 * pre-commit and pre-push hooks into a git repository (docs/reservations.md, "Git guard"). The URL, key
 * and project go into the repository's git config (`svc-guard.*`); each hook runs scripts/guard-hook.mjs.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const HOOK = join(dirname(fileURLToPath(import.meta.url)), 'guard-hook.mjs');

export function install(repo: string, url: string, key: string, project?: string): string[] {
  const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8' }).trim();
  const hooksPath = git('rev-parse', '--git-path', 'hooks');
  const dir = isAbsolute(hooksPath) ? hooksPath : resolve(repo, hooksPath);
  git('config', 'svc-guard.url', url);
  git('config', 'svc-guard.key', key);
  if (project) git('config', 'svc-guard.project', project);
  const written: string[] = [];
  for (const hook of ['pre-commit', 'pre-push']) {
    const file = join(dir, hook);
    // pre-push gets its refs on stdin: exec hands it to node unchanged
    writeFileSync(file, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(HOOK)} ${hook} "$@"\n`);
    chmodSync(file, 0o755);
    written.push(file);
  }
  return written;
}

function main(): number {
  const { positionals, values } = parseArgs({ allowPositionals: true, options: { repo: { type: 'string' }, url: { type: 'string' }, key: { type: 'string' }, project: { type: 'string' } } });
  if (positionals[0] !== 'install' || !values.repo || !values.url || !values.key) {
    console.error('usage: npm run guard -- install --repo DIR --url URL --key KEY [--project P]');
    return 2;
  }
  for (const f of install(values.repo, values.url, values.key, values.project)) console.log(`installed ${f}`);
  return 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) process.exitCode = main();
