/**
 * Feature hashing: word unigrams and bigrams and character trigrams of each word, each hashed (FNV-1a)
 * to a signed bucket. Deterministic and offline: the same text gives the same vector on every machine,
 * and texts sharing words or word pieces land near each other.
 */
import { normalize } from './provider.js';

function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export const words = (text: string): string[] => text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];

export function hashEmbed(text: string, dim: number): Float32Array {
  const v = new Float32Array(dim);
  const add = (feature: string, weight: number) => {
    const h = fnv1a(feature);
    v[h % dim] += h & 0x80000000 ? -weight : weight;
  };
  const ws = words(text);
  for (let i = 0; i < ws.length; i++) {
    add('w:' + ws[i], 1);
    if (i > 0) add('b:' + ws[i - 1] + ' ' + ws[i], 0.5);
    const padded = `^${ws[i]}$`;
    for (let j = 0; j + 3 <= padded.length; j++) add('c:' + padded.slice(j, j + 3), 0.3);
  }
  return normalize(v);
}
