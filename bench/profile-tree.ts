/** A V8 CPU profile as a call tree of the busy (non-idle) time: `npx tsx bench/profile-tree.ts FILE [min share, default 0.01]`. */
import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const byId = new Map<number, any>(p.nodes.map((n: any) => [n.id, n]));
const self = new Map<number, number>();
for (const s of p.samples) self.set(s, (self.get(s) ?? 0) + 1);
const total = new Map<number, number>();
const tot = (n: any): number => { if (total.has(n.id)) return total.get(n.id)!; let t = self.get(n.id) ?? 0; for (const c of n.children ?? []) t += tot(byId.get(c)); total.set(n.id, t); return t; };
const root = p.nodes[0]; const all = tot(root);
const idle = [...byId.values()].filter((n) => n.callFrame.functionName === '(idle)').reduce((a, n) => a + (self.get(n.id) ?? 0), 0);
const busy = all - idle;
const min = Number(process.argv[3] ?? 0.01);
const name = (n: any) => `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.replace(/.*\/work\/main\//, '').replace(/.*node_modules\//, 'npm:')}:${n.callFrame.lineNumber + 1}`;
const walk = (n: any, d: number) => { const t = total.get(n.id)!; if (t / busy < min) return; console.log(`${' '.repeat(d)}${((100 * t) / busy).toFixed(1)}% ${name(n)}`); for (const c of (n.children ?? []).map((c: number) => byId.get(c)).sort((a: any, b: any) => total.get(b.id)! - total.get(a.id)!)) walk(c, d + 1); };
console.log(`busy samples ${busy} of ${all}`);
walk(root, 0);
