import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { REPAIR_STATES, type RepairState } from '../core/repair.js';

/**
 * The repair metrics: requests by state (read when scraped, on any instance), attempts
 * sent by target type, and the time from a request's first attempt to `repaired`. No rollup or
 * asset label: which assets have open requests is what `GET /v1/repairs` answers.
 */
export interface RepairGaugeSource {
  counts(): Promise<Record<RepairState, number> | null>;
}

export function createRepairMetrics(registry: Registry) {
  let source: RepairGaugeSource | undefined;
  const registers = [registry];
  return {
    repairs: new Gauge({
      name: 'coverage_rollup_repairs',
      help: 'Repair requests by state (open, partial, repaired, abandoned, cancelled)',
      labelNames: ['state'] as const,
      registers,
      async collect() {
        const counts = await source?.counts();
        if (!counts) return;
        for (const state of REPAIR_STATES) this.set({ state }, counts[state]);
      },
    }),
    repairAttempts: new Counter({
      name: 'coverage_rollup_repair_attempts_total',
      help: 'Repair request attempts delivered (or refused for good), by target type and result',
      labelNames: ['target', 'result'] as const,
      registers,
    }),
    repairSeconds: new Histogram({
      name: 'coverage_rollup_repair_seconds',
      help: 'Time from a repair request to the index covering every range of it (repaired)',
      buckets: [1, 10, 60, 300, 900, 1800, 3600, 7200, 21_600, 86_400, 259_200],
      registers,
    }),
    setRepairSource(s: RepairGaugeSource) {
      source = s;
    },
  };
}
