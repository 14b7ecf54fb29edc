/** A map with a bound: past `max` entries the least recently used one is dropped. */
export class Lru<K, V> {
  private map = new Map<K, V>();

  constructor(readonly max: number) {}

  get size(): number {
    return this.map.size;
  }

  get(k: K): V | undefined {
    const v = this.map.get(k);
    if (v !== undefined) {
      this.map.delete(k);
      this.map.set(k, v);
    }
    return v;
  }

  set(k: K, v: V): void {
    this.map.delete(k);
    this.map.set(k, v);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value as K);
  }

  /** without refreshing its recency */
  has(k: K): boolean {
    return this.map.has(k);
  }

  delete(k: K): void {
    this.map.delete(k);
  }
}
