/** Hashes and counts an upload's bytes as they pass; refuses the chunk that takes it past `maxBytes`. */
import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { AppError } from '../errors.js';

export class Tally {
  private hash = createHash('sha256');
  size = 0;

  constructor(private maxBytes: number) {}

  add(chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) throw new AppError('PAYLOAD_TOO_LARGE', `Upload exceeds ${this.maxBytes} bytes`, { limit: this.maxBytes });
    this.hash.update(chunk);
  }

  digest(): string {
    return this.hash.digest('hex');
  }
}

export class Meter extends Transform {
  readonly tally: Tally;

  constructor(maxBytes: number) {
    super();
    this.tally = new Tally(maxBytes);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      this.tally.add(chunk);
    } catch (e) {
      return done(e as Error);
    }
    done(null, chunk);
  }
}
