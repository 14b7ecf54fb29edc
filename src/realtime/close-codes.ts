/** WebSocket close codes: the one place they are named. */
export const CLOSE = {
  normal: 1000,
  /** the key was revoked, expired or deleted while the socket was open */
  unauthorized: 4401,
  /** the consumer fell behind the per-socket buffer limit; resume from the last cursor */
  slowConsumer: 4008,
  shuttingDown: 1001,
} as const;
