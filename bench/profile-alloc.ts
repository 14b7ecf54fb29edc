/**
 * Summarises an allocation profile (`bench/alloc-sample.cjs`): bytes allocated by function (self), and by the
 * nearest of our own functions (src/, actors/) on the stack, so a library's allocations are charged to the
 * caller that asked for them.   npx tsx bench/profile-alloc.ts FILE [N]
 */
import { readFileSync } from 'node:fs';

interface Node {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: Node[];
}
const head = (JSON.parse(readFileSync(process.argv[2], 'utf8')) as { head: Node }).head;
const n = Number(process.argv[3] ?? 25);
const self = new Map<string, number>();
const own = new Map<string, number>();
let total = 0;
const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);

(function walk(x: Node, nearestOwn: string | undefined) {
  const f = x.callFrame;
  const file = f.url.replace(/^file:\/\/.*?node_modules\//, 'npm:').replace(/^file:\/\/.*?\/(src|actors)\//, '$1/');
  const name = `${f.functionName || '(anonymous)'} ${file}:${f.lineNumber + 1}`;
  const mine = /^(src|actors)\//.test(file) ? name : nearestOwn;
  total += x.selfSize;
  add(self, name, x.selfSize);
  if (mine) add(own, mine, x.selfSize);
  for (const c of x.children) walk(c, mine);
})(head, undefined);

const line = ([k, v]: [string, number]) => `${(v / 1e6).toFixed(1).padStart(8)} MB ${((100 * v) / total).toFixed(1).padStart(5)}%  ${k}`;
const top = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(line).join('\n');
console.log(`allocated ${(total / 1e6).toFixed(1)} MB (sampled)\n\n## by function (self)\n${top(self)}\n\n## by nearest own function\n${top(own)}`);
