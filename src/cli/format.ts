/** How `svc` prints signals: one compact line each (id, type, sender, first line of content), or JSON. */
export interface SignalLike {
  id: string;
  signal_type: string;
  content: string;
  from_identity?: string | null;
  to_identity?: string | null;
  urgency?: number;
  task_status?: string | null;
  receipt_state?: string;
}

export const firstLine = (text: string, max = 100): string => {
  const line = (text ?? '').split('\n', 1)[0].trim();
  return line.length > max ? line.slice(0, max - 1) + '…' : line;
};

export function signalLine(s: SignalLike): string {
  const urgency = typeof s.urgency === 'number' ? ` u${s.urgency}` : '';
  const state = s.receipt_state && s.receipt_state !== 'unread' ? ` [${s.receipt_state}]` : '';
  return `${s.id}  ${s.signal_type}${urgency}  from ${s.from_identity ?? '-'}${state}  ${firstLine(s.content)}`;
}

/** The compact view an agent's context gets: what identifies an item and its first line, no more. */
export const compact = (s: SignalLike) => ({
  id: s.id,
  signal_type: s.signal_type,
  from_identity: s.from_identity ?? null,
  to_identity: s.to_identity ?? null,
  urgency: s.urgency,
  ...(s.task_status ? { task_status: s.task_status } : {}),
  content: firstLine(s.content, 200),
});
