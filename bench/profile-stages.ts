/**
 * The per-stage CPU budget of one route from a V8 CPU profile of a service that served only that route
 * (`BENCH_CPU_ROUTES=health BENCH_CPU_PROF=dir npm run bench:cpu`):
 *   npx tsx bench/profile-stages.ts FILE [cpu µs per request] [--all]
 * Each busy sample goes to the stage of the innermost frame that names one (its file or package), so native
 * work (JSON.stringify, a write) counts for the stage that called it. Only the samples from the first request
 * to the last count (the first and last sample under the front end's `run`): start-up, connecting the store
 * included, is left out (`--all` keeps it, as this tool did before 2026-11-29 21:45, leaving out module
 * loading only). With the route's CPU µs per request from bench:cpu, each stage's share becomes µs per request.
 */
import { readFileSync } from 'node:fs';

const STAGES: [string, RegExp][] = [
  ['start-up (excluded)', /node:internal\/modules|npm:tsx|esbuild/],
  ['request log', /src\/log\.ts|npm:pino|sonic-boom/],
  ['metrics', /src\/metrics\/|npm:prom-client/],
  ['request scope (AsyncLocalStorage)', /src\/context\.ts|node:internal\/async_hooks|node:async_hooks|async_local_storage/],
  ['authentication and rate limit', /src\/auth\/|src\/identity\/|src\/limits|src\/presence\//],
  ['store (commit, reads, encoding)', /src\/store\/|npm:lmdb|npm:msgpackr|npm:@redis|npm:redis|npm:cluster-key-slot/],
  ['handler (service, runtime, machine)', /src\/signals\/|src\/runtime\/|src\/api\/|src\/health\/|actors\/|npm:xstate|src\/ids\.ts|src\/journal\//],
  ['validation', /src\/validation\.ts|npm:typebox|npm:@sinclair/],
  ['push and journal readers', /src\/realtime\/|src\/webhooks\//],
  ['front end (routing, headers, envelope, send)', /src\/http\/|src\/app\.ts/],
];
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const usPerReq = process.argv[3] && process.argv[3] !== '--all' ? Number(process.argv[3]) : undefined;
const byId = new Map<number, any>(p.nodes.map((n: any) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const file = (n: any) => n.callFrame.url.replace(/.*node_modules\//, 'npm:');
const stageOf = new Map<number, string>();
function stage(id: number): string {
  const known = stageOf.get(id);
  if (known) return known;
  const n = byId.get(id);
  const name = n.callFrame.functionName;
  let s: string | undefined;
  if (name === '(idle)') s = 'idle';
  else if (name === '(garbage collector)') s = 'garbage collector';
  else if (name === '(program)') s = 'V8 and native (unattributed)';
  else s = STAGES.find(([, re]) => re.test(file(n)))?.[0];
  if (!s) s = parent.has(id) ? stage(parent.get(id)!) : 'other';
  stageOf.set(id, s);
  return s;
}
/** whether a sample's stack passes through the front end's per-request `run` */
const inRequest = (id: number): boolean => {
  for (let x: number | undefined = id; x !== undefined; x = parent.get(x)) {
    const f = byId.get(x).callFrame;
    if (f.functionName === 'run' && f.url.includes('src/http/server.ts')) return true;
  }
  return false;
};
const first = process.argv.includes('--all') ? 0 : p.samples.findIndex(inRequest);
const last = process.argv.includes('--all') ? p.samples.length - 1 : p.samples.findLastIndex(inRequest);
if (first < 0) throw new Error('no sample under the front end\'s run: is this a profile of a service that served requests?');
const counts = new Map<string, number>();
for (const id of p.samples.slice(first, last + 1)) counts.set(stage(id), (counts.get(stage(id)) ?? 0) + 1);
counts.delete('idle');
counts.delete('start-up (excluded)');
const busy = [...counts.values()].reduce((a, b) => a + b, 0);
console.log(`| stage | share of busy samples |${usPerReq ? ' µs per request |' : ''}`);
console.log(`|:--|--:|${usPerReq ? '--:|' : ''}`);
for (const [s, n] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`| ${s} | ${((100 * n) / busy).toFixed(1)} % |${usPerReq ? ` ${((usPerReq * n) / busy).toFixed(1)} |` : ''}`);
