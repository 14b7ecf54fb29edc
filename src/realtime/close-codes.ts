/** WebSocket close codes: the one place they are named. */
export const CLOSE = {
  /** the key was revoked, expired or deleted while the socket was open */
  unauthorized: 4401,
  /** the identity's membership was suspended or removed while the socket was open */
  forbidden: 4403,
  /** the consumer fell behind the per-socket buffer limit; resume from the last cursor */
  slowConsumer: 4008,
  /** the journal no longer holds what follows the resume cursor: re-read the inbox, then resume afresh */
  cursorExpired: 4410,
  /** the backend failed during a replay; reconnect and resume */
  internal: 1011,
} as const;
