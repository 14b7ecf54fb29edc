import type { Health } from '../health/health.js';
import { VERSION } from '../health/health.js';
import { indexes } from '../identity/model.js';
import { orgIndexes } from '../org/model.js';
import type { Presence } from '../presence/presence.js';
import { signalIndexes } from '../signals/kind.js';
import type { Store } from '../store/port.js';

const STATES = ['pending', 'delivered', 'leased', 'acked', 'failed', 'dead_letter'] as const;

export class Stats {
  constructor(
    private store: Store,
    private presence: Presence,
    private health: Health,
  ) {}

  private async byState(): Promise<Record<(typeof STATES)[number], number>> {
    const counts = await Promise.all(STATES.map((s) => this.store.count(signalIndexes.byState(s))));
    return Object.fromEntries(STATES.map((s, i) => [s, counts[i]])) as Record<(typeof STATES)[number], number>;
  }

  async overview() {
    const [signal_count, identity_count, role_count, ring_count, agent_liveness, delivery_stats] = await Promise.all([
      this.store.count(signalIndexes.all),
      this.store.count(indexes.identities),
      this.store.count(orgIndexes.roles),
      this.store.count(orgIndexes.rings),
      this.presence.agents(),
      this.byState(),
    ]);
    return { signal_count, identity_count, role_count, ring_count, uptime_seconds: this.health.uptimeSeconds(), version: VERSION, agent_liveness, delivery_stats };
  }

  async healthMetrics() {
    const [total, by_delivery_state, agents] = await Promise.all([this.store.count(signalIndexes.all), this.byState(), this.presence.agents()]);
    return { signals: { total, by_delivery_state }, agents, uptime_seconds: this.health.uptimeSeconds() };
  }
}
