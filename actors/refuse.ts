/** A refusal: an action the runtime reads as "refuse this event with this catalogue code", writing nothing. */
export const refuse = (code: string) => ({ type: 'refuse' as const, params: { code } });

/** The no-op implementation machines register for `refuse`; the runtime acts on it, the machine does not. */
export const refuseAction = (_: unknown, _params: { code: string }) => {};
