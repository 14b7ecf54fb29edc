/**
 * Embedding providers: text in, unit-length float32 vectors of `dim` out. `hash` is built in and offline,
 * `openai` speaks the OpenAI-compatible /v1/embeddings API, `none` has no provider (semantic search is 503).
 */
import type { EmbeddingConfig } from '../config.js';
import { AppError } from '../errors.js';
import { hashEmbed } from './hash.js';
import { openAiEmbedder } from './openai.js';

export interface Embedder {
  readonly provider: 'hash' | 'openai' | 'none';
  /** provider and model, stored with every vector so a provider change shows as a re-embed backlog */
  readonly model: string;
  readonly dim: number;
  embed(texts: string[]): Promise<Float32Array[]>;
}

export function openEmbedder(c: EmbeddingConfig): Embedder {
  if (c.provider === 'hash') return { provider: 'hash', model: `hash-${c.dim}`, dim: c.dim, embed: async (texts) => texts.map((t) => hashEmbed(t, c.dim)) };
  if (c.provider === 'openai') return openAiEmbedder(c);
  return {
    provider: 'none',
    model: 'none',
    dim: c.dim,
    embed: async () => {
      throw new AppError('EMBEDDING_PROVIDER_UNAVAILABLE', 'No embedding provider is configured (EMBEDDING_PROVIDER=none)');
    },
  };
}

/** Scales to unit length so cosine similarity is a dot product; a zero vector stays zero. */
export function normalize(v: Float32Array): Float32Array {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i] * v[i];
  const n = Math.sqrt(s);
  if (n > 0) for (let i = 0; i < v.length; i++) v[i] /= n;
  return v;
}

export const toBase64 = (v: Float32Array) => Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
export function fromBase64(s: string): Float32Array {
  const b = Buffer.from(s, 'base64');
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}
