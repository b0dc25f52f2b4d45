import { Gauge, type MetricValue, Registry } from 'prom-client';

interface Value {
  readonly value: number;
  readonly labels?: Readonly<Record<string, string | number>>;
  readonly sharedLabels?: Readonly<Record<string, string | number>>;
  readonly metricName?: string;
}
interface Rendered {
  readonly name: string;
  readonly help: string;
  readonly type: string;
  readonly values?: readonly Value[];
}
type Renderable = { get(): Promise<Rendered>; getForPromString?: () => Promise<Rendered> };

const NONE: Readonly<Record<string, string>> = Object.freeze({});

/**
 * prom-client's registry, rendering the Prometheus text format with less garbage (issue 38). At
 * platform scale a scrape is 13,000 series (a counter per rollup and reason, a gauge per rollup
 * and state), and prom-client formats every series' labels anew on every scrape: an array of
 * entries, an array of `name="value"` parts, a copy, a filter, a join, about 1.4 KB per series
 * and 18 MB per scrape, much of it kept across the scrape's awaits and promoted. Here a series'
 * label text is made once per label object (prom-client keeps the object it was first given for
 * as long as the series lives; callers that set gauges afresh on each scrape pass the same
 * objects, see labelsOf), so a scrape allocates little more than its lines.
 *
 * The text is the same, byte for byte (test/unit/metrics/lean-registry.test.ts compares the two):
 * same escaping, order and number formatting. OpenMetrics and default labels, which the daemon
 * does not use, are left to prom-client.
 */
export class LeanRegistry extends Registry {
  private readonly labelText = new WeakMap<object, string>();
  private defaultLabels = false;

  override setDefaultLabels(labels: object): void {
    this.defaultLabels = Object.keys(labels).length > 0;
    super.setDefaultLabels(labels);
  }

  override async metrics(): Promise<string> {
    if (this.contentType !== Registry.PROMETHEUS_CONTENT_TYPE || this.defaultLabels) return super.metrics();
    const texts = await Promise.all(
      this.getMetricsAsArray().map((metric) => this.render(metric as unknown as Renderable)),
    );
    return `${texts.join('\n\n')}\n`;
  }

  private async render(metric: Renderable): Promise<string> {
    const data =
      typeof metric.getForPromString === 'function' ? await metric.getForPromString() : await metric.get();
    const name = escapeString(data.name);
    let text = `# HELP ${name} ${escapeString(data.help)}\n# TYPE ${name} ${data.type}`;
    for (const v of data.values ?? []) {
      text += `\n${v.metricName ?? name}${this.labels(v.labels ?? NONE, v.sharedLabels ?? NONE)} ${valueText(v.value)}`;
    }
    return text;
  }

  /** `{a="x",b="y"}`, or '' without labels: own labels (less any shared name), then the shared ones. */
  private labels(
    own: Readonly<Record<string, string | number>>,
    shared: Readonly<Record<string, string | number>>,
  ) {
    const plain = isEmpty(shared);
    if (plain) {
      const cached = this.labelText.get(own);
      if (cached !== undefined) return cached;
    }
    let parts = '';
    for (const key in own) {
      if (!Object.hasOwn(own, key) || Object.hasOwn(shared, key)) continue;
      parts += `${parts === '' ? '' : ','}${key}="${escapeLabelValue(own[key]!)}"`;
    }
    for (const key in shared) {
      if (!Object.hasOwn(shared, key)) continue;
      parts += `${parts === '' ? '' : ','}${key}="${escapeLabelValue(shared[key]!)}"`;
    }
    const text = parts === '' ? '' : `{${parts}}`;
    if (plain) this.labelText.set(own, text);
    return text;
  }
}

/**
 * The same object for the same label values, for gauges set afresh at each scrape (reset, then
 * set): prom-client keeps the object it is given, and LeanRegistry formats each object once.
 */
export function labelsOf<L extends Record<string, string>>(): (labels: L) => L {
  const known = new Map<string, L>();
  return (labels) => {
    const key = Object.values(labels).join('\u0000');
    let held = known.get(key);
    if (held === undefined) {
      held = Object.freeze({ ...labels });
      known.set(key, held);
    }
    return held;
  };
}

/**
 * A gauge whose series are replaced as a whole when scraped, from counts read at that moment (the
 * periods per rollup and state). prom-client's `set` keys each series by hashing its label object
 * anew (keys listed, sorted, joined) and stores a fresh entry: at platform scale 7,000 series and
 * about 3 MB of garbage per scrape, the largest allocation of an idle daemon (issue 38,
 * docs/benchmarks.md). Here a scrape hands over the whole list and `get` returns it as it is;
 * `set`, `inc` and `reset` are not used on such a gauge (they would change nothing it exports).
 */
export class SnapshotGauge<T extends string> extends Gauge<T> {
  private snapshot: MetricValue<T>[] = [];

  /** The series from now on, in this order; the last list stays until the next one. */
  replace(values: MetricValue<T>[]): void {
    this.snapshot = values;
  }

  override async get() {
    const data = await super.get(); // runs collect(), which calls replace
    return { ...data, values: this.snapshot };
  }
}

function isEmpty(o: object): boolean {
  for (const key in o) if (Object.hasOwn(o, key)) return false;
  return true;
}

/** As prom-client's: backslash and newline escaped in names, help and label values; quotes in values. */
function escapeString(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function escapeLabelValue(v: string | number): string | number {
  return typeof v === 'string' ? escapeString(v).replace(/"/g, '\\"') : v;
}

function valueText(value: number): string {
  if (Number.isNaN(value)) return 'Nan';
  if (!Number.isFinite(value)) return value < 0 ? '-Inf' : '+Inf';
  return `${value}`;
}
