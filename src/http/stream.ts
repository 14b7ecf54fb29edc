/**
 * Streamed bodies both ways, with back-pressure. In: the request body as a Node Readable that pauses the
 * uWS socket while the reader falls behind, and fails with PAYLOAD_TOO_LARGE past its cap. Out: a Readable
 * written with tryEnd, paused while the socket's buffer is full and resumed from onWritable.
 */
import { Readable } from 'node:stream';
import { AppError } from '../errors.js';
import { statusLine, type Exchange } from './uws.js';

const HIGH_WATER = 256 * 1024;

export function bodyStream(x: Exchange, limit: number, declaredLength: number | undefined): Readable {
  let size = 0;
  let paused = false;
  const unpause = () => {
    if (paused && !x.aborted) x.res.resume();
    paused = false;
  };
  const stream = new Readable({
    highWaterMark: HIGH_WATER,
    read: unpause,
    // destroyed before the answer goes out (the front end does so): the rest of the body is then dropped
    destroy(err, done) {
      unpause();
      done(err);
    },
  });
  // the handler may not be reading yet when the stream fails: its readers see `errored`, not a crash
  stream.on('error', () => {});
  const tooLarge = () => new AppError('PAYLOAD_TOO_LARGE', `Upload exceeds ${limit} bytes`, { limit });
  if (declaredLength !== undefined && declaredLength > limit) stream.destroy(tooLarge());
  x.res.onData((chunk, isLast) => {
    // a refused body is read on to its end and dropped, so the connection stays usable
    if (stream.destroyed) return unpause();
    size += chunk.byteLength;
    if (size > limit) {
      unpause();
      return void stream.destroy(tooLarge());
    }
    // uWS neuters the chunk when this callback returns: copy it
    const more = stream.push(Buffer.from(chunk.slice(0)));
    // uWS may still hand over data it had already received after a pause, up to the last chunk:
    // nothing will call read() once the stream has ended, so the socket is resumed here
    if (isLast) {
      unpause();
      stream.push(null);
    } else if (!more && !paused) {
      paused = true;
      x.res.pause();
    }
  });
  const prev = x.onAbort;
  x.onAbort = () => {
    prev?.();
    stream.destroy(new Error('client went away'));
  };
  return stream;
}

/** Writes `body` (exactly `size` bytes) after the status and headers. */
export function sendStream(x: Exchange, status: number, headers: Record<string, string>, body: Readable, size: number): Promise<void> {
  return new Promise((resolve) => {
    const finish = () => {
      body.destroy();
      resolve();
    };
    const head = () => {
      x.status = status;
      x.res.writeStatus(statusLine(status));
      for (const h in headers) x.res.writeHeader(h, headers[h]);
    };
    if (x.aborted) return finish();
    x.onAbort = finish;
    if (size === 0) {
      x.res.cork(() => {
        head();
        x.res.end();
      });
      x.aborted = true;
      return finish();
    }
    let started = false;
    body.on('error', () => {
      // a broken source after the headers went out: the client sees a short body, never a false success
      if (!x.aborted) x.res.close();
      finish();
    });
    body.on('end', () => {
      if (!x.aborted) x.res.close();
      resolve();
    });
    body.on('data', (chunk: Buffer) => {
      if (x.aborted) return finish();
      const offset = x.res.getWriteOffset();
      let ok = false;
      let done = false;
      x.res.cork(() => {
        if (!started) head();
        started = true;
        [ok, done] = x.res.tryEnd(chunk, size);
      });
      if (done) {
        x.aborted = true;
        return finish();
      }
      if (ok) return;
      body.pause();
      x.res.onWritable((at) => {
        const [ok2, done2] = x.res.tryEnd(chunk.subarray(at - offset), size);
        if (done2) {
          x.aborted = true;
          finish();
        } else if (ok2) body.resume();
        return ok2;
      });
    });
  });
}
