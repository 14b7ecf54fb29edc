/**
 * The long tasks in a V8 .cpuprofile (from `node --cpu-prof`): stretches of consecutive non-idle samples
 * longer than MIN_MS, each with the functions (ours, from src/ and actors/, else the leaf) it spent most
 * samples in. Finds what holds the event loop, where a self-time summary only shows totals.
 *   npx tsx bench/profile-stalls.ts FILE [MIN_MS=5] [N=20]
 */
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
const prof = JSON.parse(readFileSync(process.argv[2], 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
const MIN_MS = Number(process.argv[3] ?? 5);
const N = Number(process.argv[4] ?? 20);
const byId = new Map(prof.nodes.map((x) => [x.id, x]));
const parent = new Map<number, number>();
for (const x of prof.nodes) for (const c of x.children ?? []) parent.set(c, x.id);
const IDLE = new Set(['(idle)', '(program)', '(root)']);
const own = (u: string) => /\/(src|actors)\//.test(u) && !u.includes('node_modules');
const name = (n: Node) => `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^file:\/\/.*?node_modules\//, 'npm:').replace(/^file:\/\/.*?\/(src|actors)\//, '$1/')}:${n.callFrame.lineNumber + 1}`;

/** the frames a sample is charged to: the innermost of our own functions and the leaf */
function labels(id: number): string[] {
  const leaf = byId.get(id)!;
  let n: Node | undefined = leaf;
  while (n && !own(n.callFrame.url)) n = byId.get(parent.get(n.id) ?? -1);
  return n && n !== leaf ? [name(n), 'leaf ' + name(leaf)] : [name(leaf)];
}

interface Stall {
  startMs: number;
  ms: number;
  counts: Map<string, number>;
}
const stalls: Stall[] = [];
let t = 0;
let cur: Stall | undefined;
for (let i = 0; i < prof.samples.length; i++) {
  const dt = prof.timeDeltas[i] / 1000;
  t += dt;
  const node = byId.get(prof.samples[i])!;
  if (IDLE.has(node.callFrame.functionName)) {
    if (cur && cur.ms >= MIN_MS) stalls.push(cur);
    cur = undefined;
    continue;
  }
  cur ??= { startMs: t, ms: 0, counts: new Map() };
  cur.ms += dt;
  for (const l of labels(node.id)) cur.counts.set(l, (cur.counts.get(l) ?? 0) + 1);
}
const busy = prof.samples.filter((s) => !IDLE.has(byId.get(s)!.callFrame.functionName)).length;
console.log(`${stalls.length} busy stretches >= ${MIN_MS} ms (of ${(t / 1000).toFixed(1)} s, ${((100 * busy) / prof.samples.length).toFixed(0)}% busy samples); longest first:`);
for (const s of stalls.sort((a, b) => b.ms - a.ms).slice(0, N)) {
  const top = [...s.counts].sort((a, b) => b[1] - a[1]).slice(0, 6);
  console.log(`\n${s.ms.toFixed(1)} ms at ${(s.startMs / 1000).toFixed(2)} s`);
  for (const [k, v] of top) console.log(`  ${v}  ${k}`);
}
