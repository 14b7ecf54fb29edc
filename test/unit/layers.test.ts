/**
 * The layers of docs/architecture.md, read from the import graph of src/ and actors/: imports go down the
 * picture only. A folder not named here fails the test, so a new part must say which layer it is in.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

/** Higher imports lower, never the reverse. Same-layer imports are allowed except between transports. */
const LAYERS: Record<string, number> = {
  // base: one error type, config reader, id generator, clock, logger, validation, a bounded map, V8's prototypes kept fast
  errors: 0, config: 0, ids: 0, clock: 0, log: 0, validation: 0, context: 0, lru: 0, prototypes: 0,
  // ports and their adapters
  store: 1, blob: 1, vector: 1, embedding: 1,
  // the actor host
  runtime: 2,
  // services: rules per part of the interface
  identity: 3, auth: 3, audit: 3, journal: 3, org: 3, signals: 3, stats: 3, health: 3, presence: 3, memory: 3, metrics: 3, inspection: 3,
  workspace: 3, artifacts: 3, workstreams: 3, webhooks: 3, reservations: 3, federation: 3,
  // the method table /rpc and MCP share, and the composite workflow calls
  surface: 3,
  // transports
  http: 4, api: 4, realtime: 4, rpc: 4, mcp: 4, a2a: 4, openapi: 4,
  // composition
  app: 5, main: 5,
  // the `svc` command-line client: speaks HTTP and WebSocket to a service, imports only the base
  cli: 6,
};
/** transports that may not import each other (http is the shared front end below api and realtime) */
const TRANSPORT_RULES: [string, string][] = [
  ['realtime', 'api'],
  ['http', 'api'],
  ['http', 'realtime'],
  ['api', 'realtime'],
  // the JSON-RPC, MCP and A2A surfaces stand beside REST and push: none imports another transport but http
  ...(['rpc', 'mcp', 'a2a'] as const).flatMap((t): [string, string][] => ['api', 'realtime', 'rpc', 'mcp', 'a2a'].filter((o) => o !== t).map((o): [string, string] => [t, o])),
  ...(['api', 'realtime', 'http'] as const).flatMap((t): [string, string][] => ['rpc', 'mcp', 'a2a'].map((o): [string, string] => [t, o])),
];

export interface Violation {
  from: string;
  to: string;
  why: string;
}

const partOf = (file: string): string => {
  const rel = relative(join(ROOT, 'src'), file);
  const first = rel.split(/[\\/]/)[0];
  return first.replace(/\.ts$/, '');
};

/** The rules over a list of [importer, imported] files (paths under src/ or actors/). */
export function violations(edges: [string, string][]): Violation[] {
  const out: Violation[] = [];
  for (const [from, to] of edges) {
    const fromActors = from.startsWith(join(ROOT, 'actors'));
    const toActors = to.startsWith(join(ROOT, 'actors'));
    if (fromActors) {
      if (!toActors) out.push({ from, to, why: 'actors/ holds pure machines: they import only xstate and each other' });
      continue;
    }
    if (toActors) continue; // machines are pure: any layer may host them
    const a = partOf(from);
    const b = partOf(to);
    if (!(a in LAYERS)) out.push({ from, to, why: `src/${a} is in no layer of test/unit/layers.test.ts` });
    else if (!(b in LAYERS)) out.push({ from, to, why: `src/${b} is in no layer of test/unit/layers.test.ts` });
    else if (LAYERS[b] > LAYERS[a]) out.push({ from, to, why: `${a} (layer ${LAYERS[a]}) imports ${b} (layer ${LAYERS[b]})` });
    else if (TRANSPORT_RULES.some(([x, y]) => x === a && y === b)) out.push({ from, to, why: `transport ${a} imports transport ${b}` });
  }
  return out;
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

function importsOf(file: string): string[] {
  const src = readFileSync(file, 'utf8');
  const specs = [...src.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+['"]([^'"]+)['"]/g), ...src.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1]);
  return specs.filter((s) => s.startsWith('.')).map((s) => resolve(dirname(file), s.replace(/\.js$/, '.ts')));
}

const graph = (): [string, string][] => [...files(join(ROOT, 'src')), ...files(join(ROOT, 'actors'))].flatMap((f) => importsOf(f).map((t): [string, string] => [f, t]));

describe('layers', () => {
  it('the import graph of src/ and actors/ goes down the layers only', () => {
    const edges = graph();
    expect(edges.length).toBeGreaterThan(50);
    const found = violations(edges).map((v) => `${relative(ROOT, v.from)} -> ${relative(ROOT, v.to)}: ${v.why}`);
    expect(found).toEqual([]);
  });

  it('the rules catch an import that crosses them', () => {
    const src = (p: string) => join(ROOT, 'src', p);
    const crossing: [string, string][] = [
      [src('realtime/ws.ts'), src('api/signals.ts')],
      [src('signals/service.ts'), src('realtime/hub.ts')],
      [src('store/redis.ts'), src('runtime/runtime.ts')],
      [join(ROOT, 'actors/signal.ts'), src('clock.ts')],
      [src('newpart/x.ts'), src('errors.ts')],
    ];
    expect(violations(crossing).map((v) => v.why)).toEqual([
      'transport realtime imports transport api',
      'signals (layer 3) imports realtime (layer 4)',
      'store (layer 1) imports runtime (layer 2)',
      'actors/ holds pure machines: they import only xstate and each other',
      'src/newpart is in no layer of test/unit/layers.test.ts',
    ]);
    expect(violations([[src('api/signals.ts'), src('signals/schemas.ts')], [src('realtime/ws.ts'), src('http/uws.ts')]])).toEqual([]);
  });

  // bin/svc.js names its cached bundle by a hash of src/cli and of the files it lists: a CLI import outside
  // src/cli that the list misses would keep running a stale bundle after that file changed
  it('the svc bundle’s cache key covers every file the CLI runs from outside src/cli', () => {
    const cli = join(ROOT, 'src/cli');
    const runtimeImports = (file: string) =>
      [...readFileSync(file, 'utf8').matchAll(/(?:^|\n)\s*(?:import|export)(?!\s+type\b)[^'"]*?from\s+['"](\.[^'"]+)['"]/g)].map((m) => resolve(dirname(file), m[1].replace(/\.js$/, '.ts')));
    const seen = new Set<string>();
    const walk = (f: string): void => {
      if (seen.has(f)) return;
      seen.add(f);
      runtimeImports(f).forEach(walk);
    };
    files(cli).forEach(walk);
    const outside = [...seen].filter((f) => !f.startsWith(cli + '/')).map((f) => relative(ROOT, f)).sort();
    const listed = [...readFileSync(join(ROOT, 'bin/svc.js'), 'utf8').matchAll(/join\(root, ((?:'[^']+'(?:, )?)+)\)/g)].map((m) => m[1].split(', ').map((p) => p.slice(1, -1)).join('/')).filter((p) => p !== 'src/cli');
    expect(outside).toContain('actors/signal-wake.ts');
    expect(listed.sort()).toEqual(outside);
  });
});
