/** Derives a machine's state table from its definition: one row per candidate transition, in rule order. */
import type { AnyStateMachine } from 'xstate';

export type Row = [state: string, event: string, guard: string, next: string, actions: string, refusal: string];

export function machineRows(machine: AnyStateMachine): Row[] {
  const rows: Row[] = [];
  const states = machine.config.states as Record<string, any>;
  for (const [state, def] of Object.entries(states)) {
    const on: Record<string, any> = { ...(def.on ?? {}) };
    if (def.always) on['(always)'] = def.always;
    for (const [event, spec] of Object.entries(on)) {
      for (const t of [spec].flat()) {
        const c = typeof t === 'string' ? { target: t } : t;
        const actions = [c.actions ?? []].flat();
        const refuse = actions.find((a: any) => a?.type === 'refuse');
        const named = actions.filter((a: any) => a !== refuse).map((a: any) => (typeof a === 'string' ? a : a?.type === 'xstate.raise' || typeof a === 'function' ? 'raise' : a?.type));
        const guard = typeof c.guard === 'string' ? c.guard : c.guard?.type ?? '—';
        rows.push([state, event, guard, c.target ? String(c.target).replace(/^#\w+\./, '') : '—', named.join(', ') || '—', refuse?.params?.code ?? '—']);
      }
    }
  }
  return rows;
}

/** Rows of the first markdown table after `heading` in `doc`. */
export function docRows(doc: string, heading: string): Row[] {
  const start = doc.indexOf(heading);
  if (start < 0) throw new Error(`heading "${heading}" not found`);
  const lines = doc.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const table: string[] = [];
  for (const l of lines.slice(first)) {
    if (!l.startsWith('|')) break;
    table.push(l);
  }
  return table.slice(2).map((l) => l.split('|').slice(1, -1).map((c) => c.trim().replace(/`/g, '')) as Row);
}

export function toMarkdown(rows: Row[]): string {
  const head = '| state | event | guard | next | actions | refusal |\n|---|---|---|---|---|---|\n';
  return head + rows.map((r) => `| ${r.map((c) => (c === '—' ? c : '`' + c + '`')).join(' | ')} |`).join('\n');
}
