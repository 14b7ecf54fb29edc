/**
 * What `svc` keeps on disk, in one user-only directory (`SVC_CONFIG_DIR`, else `$XDG_CONFIG_HOME/svc`, else
 * `~/.config/svc`): `credentials.json` (url, key, identity) and `state.json` (the push cursor `svc wait`
 * resumes from, the ids already shown to the agent, what a stop hook already blocked on).
 */
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface Credentials {
  url: string;
  key: string;
  identity_id: string;
  name: string;
}

export interface State {
  /** journal cursor of the last push frame `svc wait` processed */
  cursor?: string;
  /** signal ids already shown (wait, inbox, hooks), oldest first, bounded */
  seen: string[];
  /** the unacknowledged ids a stop hook last blocked on */
  stop_blocked: string[];
}

/** ids remembered as shown: enough for any inbox an agent works through, small enough to rewrite each run */
const SEEN_MAX = 2000;

export function configDir(env: NodeJS.ProcessEnv = process.env, flag?: string): string {
  if (flag) return flag;
  if (env.SVC_CONFIG_DIR) return env.SVC_CONFIG_DIR;
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return join(base, 'svc');
}

function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

/** Written whole under a temporary name and renamed, readable by the user only (the key is a secret). */
export function writePrivate(file: string, data: unknown, dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(data, null, 2) + '\n', { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
}

export class Files {
  constructor(readonly dir: string) {}

  get credentialsFile(): string {
    return join(this.dir, 'credentials.json');
  }

  private get stateFile(): string {
    return join(this.dir, 'state.json');
  }

  credentials(): Credentials | undefined {
    return readJson<Credentials>(this.credentialsFile);
  }

  saveCredentials(c: Credentials): void {
    writePrivate(this.credentialsFile, c, this.dir);
  }

  state(): State {
    const s = readJson<Partial<State>>(this.stateFile) ?? {};
    return { cursor: s.cursor, seen: s.seen ?? [], stop_blocked: s.stop_blocked ?? [] };
  }

  saveState(s: State): void {
    writePrivate(this.stateFile, { ...s, seen: s.seen.slice(-SEEN_MAX) }, this.dir);
  }

  /** Marks ids shown; answers the ones not shown before, in the order given. */
  markSeen(ids: string[]): string[] {
    const s = this.state();
    const seen = new Set(s.seen);
    const fresh = ids.filter((id) => !seen.has(id));
    if (fresh.length) this.saveState({ ...s, seen: [...s.seen, ...fresh] });
    return fresh;
  }
}
