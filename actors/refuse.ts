/** A refusal: an action the runtime reads as "refuse this event with this catalogue code", writing nothing. */
export const refuse = (code: string, details?: Record<string, unknown>) => ({ type: 'refuse' as const, params: details ? { code, details } : { code } });

/** The no-op implementation machines register for `refuse`; the runtime acts on it, the machine does not. */
export const refuseAction = (_: unknown, _params: { code: string; details?: Record<string, unknown> }) => {};
