/** Runs `svc` exactly as an agent does: `node bin/svc.js`, its own process, with HOME and XDG_CONFIG_HOME in a temp dir. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { childEnv } from './server.js';

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** ms from spawn to exit */
  ms: number;
}

/** A user of the CLI: its own home, so its key and state are its own. */
export interface CliUser {
  home: string;
  configDir: string;
  env: Record<string, string>;
  run(args: string[], o?: { input?: string; env?: Record<string, string> }): Promise<Run>;
  /** a long run (svc wait): the process, its output so far, and its end */
  start(args: string[]): Started;
}

export interface Started {
  proc: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** resolves with the run once the process exits */
  done: Promise<Run>;
  /** ms timestamp (Date.now) of the first stdout chunk, once there is one */
  firstOutputAt(): number | undefined;
}

export async function cliUser(): Promise<CliUser> {
  const home = await mkdtemp(join(tmpdir(), 'svc-home-'));
  const env = { HOME: home, XDG_CONFIG_HOME: join(home, '.config'), SVC_URL: '', SVC_KEY: '', SVC_CONFIG_DIR: '' };
  const start = (args: string[], extra: Record<string, string> = {}, input?: string): Started => {
    const t0 = Date.now();
    const proc = spawn(process.execPath, ['bin/svc.js', ...args], { env: childEnv({ ...env, ...extra }), stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let first: number | undefined;
    proc.stdout!.on('data', (d) => {
      first ??= Date.now();
      stdout += d;
    });
    proc.stderr!.on('data', (d) => (stderr += d));
    proc.stdin!.end(input ?? '');
    const done = new Promise<Run>((resolve) => proc.on('close', (code) => resolve({ code, stdout, stderr, ms: Date.now() - t0 })));
    return { proc, stdout: () => stdout, stderr: () => stderr, done, firstOutputAt: () => first };
  };
  return {
    home,
    configDir: join(home, '.config', 'svc'),
    env,
    run: (args, o = {}) => start(args, o.env, o.input).done,
    start: (args) => start(args),
  };
}

/** One error line with a catalogue code, as every refusal prints it. */
export const ERROR_LINE = /^[A-Z][A-Z0-9_]+: .+\n$/;
