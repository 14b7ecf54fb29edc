/**
 * The uWebSockets.js rules in one place: copy what is needed from `req` before any await, notice
 * aborts, and cork every write made after an await.
 */
import uws from 'uWebSockets.js';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';

export { uws };
export type { HttpRequest, HttpResponse };

export function nativeLoaded(): boolean {
  return String(uws.App).includes('[native code]');
}

export interface Exchange {
  res: HttpResponse;
  aborted: boolean;
  /** called once if the client goes away */
  onAbort?: () => void;
  /** the status answered, once an answer was written */
  status?: number;
}

export function exchange(res: HttpResponse): Exchange {
  const x: Exchange = { res, aborted: false };
  res.onAborted(() => {
    x.aborted = true;
    x.onAbort?.();
  });
  return x;
}

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK', 201: '201 Created', 204: '204 No Content', 206: '206 Partial Content', 400: '400 Bad Request', 401: '401 Unauthorized',
  403: '403 Forbidden', 404: '404 Not Found', 409: '409 Conflict', 410: '410 Gone', 412: '412 Precondition Failed', 413: '413 Payload Too Large', 416: '416 Range Not Satisfiable',
  422: '422 Unprocessable Entity', 429: '429 Too Many Requests', 500: '500 Internal Server Error',
  502: '502 Bad Gateway', 503: '503 Service Unavailable', 504: '504 Gateway Timeout',
};
export const statusLine = (s: number) => STATUS_TEXT[s] ?? String(s);

export function send(x: Exchange, status: number, headers: Record<string, string>, body: string | Buffer): void {
  if (x.aborted) return;
  x.status = status;
  x.res.cork(() => {
    x.res.writeStatus(statusLine(status));
    for (const h in headers) x.res.writeHeader(h, headers[h]);
    x.res.end(body);
  });
  x.aborted = true; // ended: no second write
}

/** Reads the whole body; settles as 'too_large' as soon as it passes `limit` bytes. */
export function readBody(x: Exchange, limit: number): Promise<Buffer | 'too_large'> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    x.res.onData((chunk, isLast) => {
      if (over) return;
      size += chunk.byteLength;
      if (size > limit) {
        over = true;
        return resolve('too_large');
      }
      chunks.push(Buffer.from(chunk.slice(0)));
      if (isLast) resolve(Buffer.concat(chunks));
    });
  });
}
