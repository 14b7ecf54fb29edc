/**
 * Summarises a V8 .cpuprofile (from `node --cpu-prof`): the top functions by self time and the top source
 * files/packages by self time, as Markdown lines.   npx tsx bench/profile-top.ts FILE [N] [FROM_S TO_S]
 * FROM_S and TO_S keep only the samples between those seconds of the profile (e.g. a fan-out's rounds, not
 * the start-up and set-up before them; `bench/profile-stalls.ts` prints where its busy stretches start).
 */
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount: number;
}
const prof = JSON.parse(readFileSync(process.argv[2], 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
const n = Number(process.argv[3] ?? 25);
if (process.argv[4] !== undefined) {
  const [from, to] = [Number(process.argv[4]) * 1e6, Number(process.argv[5] ?? Infinity) * 1e6];
  const kept: number[] = [];
  let t = 0;
  prof.samples.forEach((s, i) => {
    t += prof.timeDeltas[i];
    if (t >= from && t <= to) kept.push(s);
  });
  const hits = new Map<number, number>();
  for (const s of kept) hits.set(s, (hits.get(s) ?? 0) + 1);
  for (const x of prof.nodes) x.hitCount = hits.get(x.id) ?? 0;
  prof.samples = kept;
}
const total = prof.nodes.reduce((a, x) => a + x.hitCount, 0);
const idle = prof.nodes.filter((x) => ['(idle)', '(program)', '(garbage collector)'].includes(x.callFrame.functionName));
const byFn = new Map<string, number>();
const byFile = new Map<string, number>();
for (const x of prof.nodes) {
  const f = x.callFrame;
  const file = f.url.replace(/^file:\/\/.*?node_modules\//, 'npm:').replace(/^file:\/\/.*?\/(src|actors)\//, '$1/').replace(/^node:/, 'node:');
  const pkg = file.startsWith('npm:') ? file.split('/').slice(0, file.startsWith('npm:@') ? 2 : 1).join('/') : file || f.functionName;
  const fn = `${f.functionName || '(anonymous)'} ${file}:${f.lineNumber + 1}`;
  byFn.set(fn, (byFn.get(fn) ?? 0) + x.hitCount);
  byFile.set(pkg, (byFile.get(pkg) ?? 0) + x.hitCount);
}
const pct = (h: number) => ((100 * h) / total).toFixed(1).padStart(5) + '%';
console.log(`samples ${total}; ${idle.map((x) => `${x.callFrame.functionName} ${pct(x.hitCount)}`).join(', ')}`);
console.log('\n## by function (self)');
for (const [k, v] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, n)) console.log(`${pct(v)}  ${k}`);
console.log('\n## by file / package (self)');
for (const [k, v] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, n)) console.log(`${pct(v)}  ${k}`);

// inclusive time of our own functions (src/, actors/) and of the packages they call into
const full = prof as unknown as { nodes: (Node & { children?: number[] })[]; samples: number[] };
const parent = new Map<number, number>();
for (const x of full.nodes) for (const c of x.children ?? []) parent.set(c, x.id);
const byId = new Map(full.nodes.map((x) => [x.id, x]));
const incl = new Map<string, number>();
for (const s of full.samples) {
  const seen = new Set<string>();
  for (let id: number | undefined = s; id !== undefined; id = parent.get(id)) {
    const f = byId.get(id)!.callFrame;
    const m = /\/(src|actors)\/(.*)$/.exec(f.url);
    if (!m) continue;
    const k = `${f.functionName || '(anonymous)'} ${m[1]}/${m[2]}:${f.lineNumber + 1}`;
    if (seen.has(k)) continue;
    seen.add(k);
    incl.set(k, (incl.get(k) ?? 0) + 1);
  }
}
const ns = full.samples.length;
console.log('\n## our functions, inclusive');
for (const [k, v] of [...incl].sort((a, b) => b[1] - a[1]).slice(0, n)) console.log(`${((100 * v) / ns).toFixed(1).padStart(5)}%  ${k}`);
