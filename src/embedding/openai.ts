/**
 * Any OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, Ollama, vLLM, TEI): texts go in batches of
 * EMBEDDING_BATCH, each request bounded by EMBEDDING_TIMEOUT_MS. A failure or a malformed answer is
 * EMBEDDING_PROVIDER_ERROR; a vector of another length than EMBEDDING_DIM is EMBEDDING_DIMENSION_MISMATCH.
 */
import type { EmbeddingConfig } from '../config.js';
import { AppError } from '../errors.js';
import { normalize, type Embedder } from './provider.js';

export function openAiEmbedder(c: EmbeddingConfig): Embedder {
  const endpoint = /\/v1$/.test(c.url!) ? `${c.url}/embeddings` : /\/embeddings$/.test(c.url!) ? c.url! : `${c.url}/v1/embeddings`;
  async function batch(input: string[]): Promise<Float32Array[]> {
    let res: Response;
    try {
      res = await fetch(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(c.apiKey ? { authorization: `Bearer ${c.apiKey}` } : {}) },
        body: JSON.stringify({ model: c.model, input }),
        signal: AbortSignal.timeout(c.timeoutMs),
      });
    } catch (e) {
      throw new AppError('EMBEDDING_PROVIDER_ERROR', `Embedding provider unreachable: ${(e as Error).message}`, { provider: 'openai' });
    }
    if (!res.ok) throw new AppError('EMBEDDING_PROVIDER_ERROR', `Embedding provider answered ${res.status}`, { provider: 'openai', status: res.status });
    const body = (await res.json().catch(() => undefined)) as { data?: { index?: number; embedding?: unknown }[] } | undefined;
    const rows = body?.data;
    if (!Array.isArray(rows) || rows.length !== input.length) throw new AppError('EMBEDDING_PROVIDER_ERROR', 'Embedding provider answered without one embedding per input', { provider: 'openai' });
    const out: Float32Array[] = new Array(input.length);
    rows.forEach((r, i) => {
      const e = r.embedding;
      if (!Array.isArray(e) || !e.every((x) => typeof x === 'number')) throw new AppError('EMBEDDING_PROVIDER_ERROR', 'Embedding provider answered a malformed embedding', { provider: 'openai' });
      if (e.length !== c.dim) throw new AppError('EMBEDDING_DIMENSION_MISMATCH', `Provider vectors have ${e.length} dimensions, EMBEDDING_DIM is ${c.dim}`, { expected: c.dim, got: e.length });
      out[typeof r.index === 'number' ? r.index : i] = normalize(Float32Array.from(e as number[]));
    });
    return out;
  }
  return {
    provider: 'openai',
    model: `openai:${c.model}`,
    dim: c.dim,
    async embed(texts) {
      const out: Float32Array[] = [];
      for (let i = 0; i < texts.length; i += c.batch) out.push(...(await batch(texts.slice(i, i + c.batch))));
      return out;
    },
  };
}
