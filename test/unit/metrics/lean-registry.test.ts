import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LeanRegistry, labelsOf, SnapshotGauge } from '../../../src/metrics/lean-registry.js';
import { createMetrics } from '../../../src/metrics/registry.js';

/** The same metrics on prom-client's registry and on ours: the text must be the same, byte for byte. */
function both() {
  const plain = new Registry();
  const lean = new LeanRegistry();
  const registers = [plain, lean];
  const counter = new Counter({
    name: 'c_total',
    help: 'a counter \\ with "quotes"\nand a newline',
    labelNames: ['rollup', 'reason'] as const,
    registers,
  });
  const bare = new Counter({ name: 'bare_total', help: 'no labels', registers });
  const gauge = new Gauge({
    name: 'g',
    help: 'a gauge',
    labelNames: ['rollup', 'state'] as const,
    registers,
  });
  const histogram = new Histogram({
    name: 'h_seconds',
    help: 'a histogram',
    labelNames: ['work'] as const,
    buckets: [0.001, 0.1, 1],
    registers,
  });
  const unlabelled = new Histogram({ name: 'u_seconds', help: 'no labels', buckets: [1], registers });
  const collected = new Gauge({
    name: 'collected',
    help: 'set at scrape time',
    labelNames: ['asset'] as const,
    registers,
    collect() {
      this.reset();
      this.set({ asset: 'a "b"' }, 1);
      this.set({ asset: 'back\\slash\nnewline' }, Number.NaN);
    },
  });
  return { plain, lean, counter, bare, gauge, histogram, unlabelled, collected };
}

describe('LeanRegistry', () => {
  it('renders the Prometheus text exactly as prom-client does', async () => {
    const m = both();
    expect(await m.lean.metrics()).toBe(await m.plain.metrics()); // nothing observed yet
    m.counter.inc({ rollup: 'h1', reason: 'covered' });
    m.counter.inc({ rollup: 'h2', reason: 'deadline' }, 3);
    m.counter.inc({ rollup: 'odd "name"\\x\ny', reason: 'manual' });
    m.bare.inc(2);
    m.gauge.set({ rollup: 'h1', state: 'waiting' }, 1.5);
    m.gauge.set({ state: 'triggered', rollup: 'h1' }, Number.POSITIVE_INFINITY);
    m.gauge.set({ rollup: 'h2', state: 'missed' }, Number.NEGATIVE_INFINITY);
    m.histogram.observe({ work: 'idle' }, 0.0005);
    m.histogram.observe({ work: 'busy' }, 0.5);
    m.histogram.observe({ work: 'busy' }, 5);
    m.unlabelled.observe(0.2);
    for (let scrape = 0; scrape < 3; scrape++) {
      // Scraped again (cached label text) after more changes: still the same.
      m.counter.inc({ rollup: 'h1', reason: 'covered' });
      m.gauge.reset();
      m.gauge.set({ rollup: `h${scrape}`, state: 'waiting' }, scrape);
      expect(await m.lean.metrics()).toBe(await m.plain.metrics());
    }
  });

  it("renders the daemon's own metrics as prom-client does", async () => {
    const metrics = createMetrics();
    metrics.eventsIngested.inc({ status: 'committed' }, 5);
    metrics.schedulerPassSeconds.observe({ work: 'idle' }, 0.004);
    const plain = new Registry();
    // Every metric but the process ones (their values move between two renderings).
    for (const metric of metrics.registry.getMetricsAsArray()) {
      const { name } = metric as unknown as { name: string };
      if (!name.startsWith('process_') && !name.startsWith('nodejs_')) plain.registerMetric(metric as never);
    }
    const lean = new LeanRegistry();
    for (const metric of plain.getMetricsAsArray()) lean.registerMetric(metric as never);
    expect(await lean.metrics()).toBe(await plain.metrics());
  });

  it('leaves OpenMetrics and default labels to prom-client', async () => {
    const m = both();
    m.counter.inc({ rollup: 'h1', reason: 'covered' });
    m.lean.setDefaultLabels({ instance: 'a' });
    m.plain.setDefaultLabels({ instance: 'a' });
    expect(await m.lean.metrics()).toBe(await m.plain.metrics());
  });
});

describe('labelsOf', () => {
  it('gives the same object for the same label values', () => {
    const of = labelsOf<{ rollup: string; state: string }>();
    const a = of({ rollup: 'h1', state: 'waiting' });
    expect(of({ rollup: 'h1', state: 'waiting' })).toBe(a);
    expect(of({ rollup: 'h1', state: 'missed' })).not.toBe(a);
    expect(a).toEqual({ rollup: 'h1', state: 'waiting' });
  });
});

describe('SnapshotGauge', () => {
  it('exports what the last scrape handed over, as a gauge reset and set with the same values would', async () => {
    const plain = new Registry();
    const lean = new LeanRegistry();
    let scrape = 0;
    const rows = () =>
      scrape % 2 === 0
        ? [
            { rollup: 'h1', state: 'waiting', n: scrape },
            { rollup: 'odd "name"', state: 'missed', n: 2 },
          ]
        : [{ rollup: 'h2', state: 'triggered', n: 7 }];
    new Gauge({
      name: 'periods',
      help: 'by rollup and state',
      labelNames: ['rollup', 'state'] as const,
      registers: [plain],
      collect() {
        this.reset();
        for (const r of rows()) this.set({ rollup: r.rollup, state: r.state }, r.n);
      },
    });
    const of = labelsOf<{ rollup: string; state: string }>();
    const snapshot: SnapshotGauge<'rollup' | 'state'> = new SnapshotGauge({
      name: 'periods',
      help: 'by rollup and state',
      labelNames: ['rollup', 'state'] as const,
      registers: [lean],
      collect() {
        snapshot.replace(
          rows().map((r) => ({ value: r.n, labels: of({ rollup: r.rollup, state: r.state }) })),
        );
      },
    });
    for (; scrape < 4; scrape++) expect(await lean.metrics()).toBe(await plain.metrics());
  });

  it('keeps the last list when a scrape hands over none', async () => {
    const gauge = new SnapshotGauge({ name: 'g', help: 'h', labelNames: ['rollup'] as const, registers: [] });
    gauge.replace([{ value: 3, labels: { rollup: 'a' } }]);
    expect((await gauge.get()).values).toEqual([{ value: 3, labels: { rollup: 'a' } }]);
    expect((await gauge.get()).values).toEqual([{ value: 3, labels: { rollup: 'a' } }]);
  });
});
