/** What the operator scripts share: flags (with SVC_URL / SVC_KEY), one HTTP call with the envelope, tables. */
export interface Flags {
  url: string;
  key: string | undefined;
  json: boolean;
  /** --name value pairs other than url, key, json */
  opts: Record<string, string>;
  args: string[];
}

export function parseFlags(argv: string[], env: NodeJS.ProcessEnv = process.env): Flags {
  const opts: Record<string, string> = {};
  const args: string[] = [];
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') json = true;
    else if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      if (eq > 0) opts[a.slice(2, eq)] = a.slice(eq + 1);
      else if (i + 1 < argv.length) opts[a.slice(2)] = argv[++i];
      else throw new UsageError(`${a} needs a value`);
    } else args.push(a);
  }
  const { url = env.SVC_URL || 'http://localhost:3000', key = env.SVC_KEY || undefined, ...rest } = opts;
  return { url: url.replace(/\/+$/, ''), key, json, opts: rest, args };
}

export class UsageError extends Error {}

export class ServiceError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** One call; answers `data` or throws the error envelope's code. */
export async function call(f: Flags, method: string, path: string, body?: unknown): Promise<any> {
  const headers: Record<string, string> = {};
  if (f.key) headers.authorization = `Bearer ${f.key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let r: Response;
  try {
    r = await fetch(f.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ServiceError(0, 'UNREACHABLE', `cannot reach ${f.url}: ${(e as Error).message}`);
  }
  const text = await r.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ServiceError(r.status, 'NOT_JSON', `${method} ${path} answered ${r.status} with a body that is not JSON`);
  }
  if (!r.ok) throw new ServiceError(r.status, json.error?.code ?? `HTTP_${r.status}`, json.error?.message ?? r.statusText);
  return json.data;
}

/** A plain text table: columns padded to their widest cell. */
export function table(rows: Record<string, unknown>[], columns: string[]): string {
  const cell = (v: unknown) => (v === null || v === undefined ? '-' : typeof v === 'object' ? JSON.stringify(v) : String(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...rows.map((r) => line(columns.map((c) => cell(r[c]))))].join('\n');
}

/** Runs a command: usage errors exit 2, service errors print `CODE: message` and exit 1. */
export async function main(run: () => Promise<void>, usage: string): Promise<void> {
  try {
    await run();
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`${e.message}\n\n${usage}`);
      process.exitCode = 2;
    } else if (e instanceof ServiceError) {
      console.error(`${e.code}: ${e.message}`);
      process.exitCode = 1;
    } else throw e;
  }
}
