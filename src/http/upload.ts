/**
 * An upload as a file stream plus its fields, from either encoding: multipart/form-data (parsed as it
 * streams by busboy; fields must come before the file part, as browsers and curl send them) or a raw body
 * (fields from the query string, type from Content-Type).
 */
import { PassThrough, type Readable } from 'node:stream';
import busboy from 'busboy';
import { AppError, type ErrorCode } from '../errors.js';
import type { Request } from './server.js';

export interface Upload {
  fields: Record<string, string>;
  file: Readable;
  /** the part's filename (multipart) */
  filename: string | undefined;
  content_type: string;
}

const OCTETS = 'application/octet-stream';

export function readUpload(req: Request, invalid: ErrorCode): Promise<Upload> {
  const body = req.stream!;
  const type = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data/i.test(type)) {
    return Promise.resolve({ fields: { ...req.query }, file: body, filename: undefined, content_type: type.trim() || OCTETS });
  }
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({ headers: req.headers, limits: { files: 1, fields: 50, fieldSize: 64 * 1024, parts: 60 } });
    } catch {
      return reject(new AppError(invalid, 'multipart/form-data needs a boundary', { field: 'content-type' }));
    }
    const fields: Record<string, string> = { ...req.query };
    let file: Readable | undefined;
    // the body's own failure (over the upload cap, client gone) wins over what the parser makes of it
    const failure = (e: unknown) => (body.errored instanceof AppError ? body.errored : e instanceof AppError ? e : new AppError(invalid, `Malformed multipart body: ${(e as Error).message}`, { field: 'body' }));
    bb.on('field', (name, value) => {
      if (!file) fields[name] = value;
    });
    bb.on('file', (name, stream, info) => {
      // busboy fails every file stream of a truncated body: one nobody reads needs a listener too, or the
      // failure is an uncaught 'error' event that ends the process
      stream.on('error', () => {});
      if (file || name !== 'file') return void stream.resume();
      // busboy fails its file stream itself (a truncated body), possibly before the handler reads it: the
      // handler gets a stream of ours that fails with the catalogue error and is never left without a listener
      const out = new PassThrough();
      out.on('error', () => {});
      stream.on('error', (e) => out.destroy(failure(e)));
      stream.pipe(out);
      file = out;
      resolve({ fields, file: out, filename: info.filename, content_type: info.mimeType || OCTETS });
    });
    bb.on('error', (e) => {
      const err = failure(e);
      if (file && !file.destroyed) file.destroy(err);
      reject(err);
    });
    bb.on('close', () => reject(new AppError(invalid, 'The multipart body has no part named file', { field: 'file' })));
    // a body over the upload cap (or a client gone) fails the parser and the file stream with it
    body.on('error', (e) => bb.destroy(e));
    body.pipe(bb);
  });
}
