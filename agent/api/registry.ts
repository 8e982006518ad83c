/**
 * The one metrics registry: every family spcd exports is declared here once,
 * with its type, help and label names, and rendered in the Prometheus text
 * format (0.0.4). Registration refuses what Prometheus conventions forbid: a
 * second family of the same name, a counter without `_total`, a gauge or
 * histogram with it, a histogram named like its own series, invalid metric
 * or label names. prom-client was measured and not taken (docs/reference/metrics.md):
 * it cost 12-14 MB of RSS against the 80 MB budget.
 */
import { SpcdError } from '../errors.js';

export type Labels = Readonly<Record<string, string>>;

export interface FamilyDef {
  readonly name: string;
  readonly help: string;
  readonly labels?: readonly string[];
}

export interface Sample {
  readonly labels: Labels;
  readonly value: number;
}

export interface Counter {
  inc(labels?: Labels, by?: number): void;
}

export interface Gauge {
  set(labels: Labels, value: number): void;
}

export interface Histogram {
  observe(labels: Labels, value: number): void;
}

type Kind = 'counter' | 'gauge' | 'histogram';

interface Family {
  readonly kind: Kind;
  readonly def: FamilyDef;
  readonly labels: readonly string[];
  readonly lines: () => string[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export class MetricsRegistry {
  private readonly families = new Map<string, Family>();
  /** Every series name in use (a histogram's _bucket, _sum and _count too). */
  private readonly series = new Set<string>();

  /** A counter spcd increments. Its name ends in `_total`. */
  counter(def: FamilyDef): Counter {
    const values = new Map<string, { labels: Labels; value: number }>();
    const f = this.add('counter', def, () => [...values.values()]);
    return {
      inc: (labels = {}, by = 1) => {
        if (!(by >= 0)) throw internal(`${def.name}: a counter only goes up (got ${by})`);
        const key = keyOf(f, labels);
        const cur = values.get(key);
        if (cur) cur.value += by;
        else values.set(key, { labels, value: by });
      },
    };
  }

  /** A gauge spcd sets. */
  gauge(def: FamilyDef): Gauge {
    const values = new Map<string, { labels: Labels; value: number }>();
    const f = this.add('gauge', def, () => [...values.values()]);
    return { set: (labels, value) => void values.set(keyOf(f, labels), { labels, value }) };
  }

  /** A family whose samples are read at each scrape (from the status, the process...). */
  collect(kind: 'counter' | 'gauge', def: FamilyDef, read: () => Iterable<Sample>): void {
    this.add(kind, def, read);
  }

  histogram(def: FamilyDef & { readonly buckets: readonly number[] }): Histogram {
    const buckets = [...def.buckets].sort((a, b) => a - b);
    const data = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
    const f = this.addFamily('histogram', def, () => {
      const out: string[] = [];
      for (const h of data.values()) {
        let cumulative = 0;
        buckets.forEach((b, i) => {
          cumulative += h.counts[i] ?? 0;
          out.push(line(`${def.name}_bucket`, { ...h.labels, le: fmt(b) }, cumulative));
        });
        out.push(line(`${def.name}_bucket`, { ...h.labels, le: '+Inf' }, h.count));
        out.push(line(`${def.name}_sum`, h.labels, h.sum));
        out.push(line(`${def.name}_count`, h.labels, h.count));
      }
      return out;
    });
    return {
      observe: (labels, value) => {
        const key = keyOf(f, labels);
        let h = data.get(key);
        if (!h) {
          h = { labels, counts: buckets.map(() => 0), sum: 0, count: 0 };
          data.set(key, h);
        }
        const i = buckets.findIndex((b) => value <= b);
        if (i >= 0) h.counts[i] = (h.counts[i] ?? 0) + 1;
        h.sum += value;
        h.count++;
      },
    };
  }

  /** The declared families, in registration order (docs and tests compare them). */
  declared(): readonly { name: string; type: Kind; help: string; labels: readonly string[] }[] {
    return [...this.families.values()].map((f) => ({
      name: f.def.name,
      type: f.kind,
      help: f.def.help,
      labels: f.labels,
    }));
  }

  /** The exposition: each family's HELP and TYPE once, then its samples. */
  render(): string {
    const out: string[] = [];
    for (const f of this.families.values()) {
      out.push(`# HELP ${f.def.name} ${escHelp(f.def.help)}`, `# TYPE ${f.def.name} ${f.kind}`);
      out.push(...f.lines());
    }
    return out.join('\n') + '\n';
  }

  private add(kind: 'counter' | 'gauge', def: FamilyDef, read: () => Iterable<Sample>): Family {
    const f: Family = this.addFamily(kind, def, () => {
      const out: string[] = [];
      for (const s of read()) {
        keyOf(f, s.labels);
        out.push(line(def.name, s.labels, s.value));
      }
      return out;
    });
    return f;
  }

  private addFamily(kind: Kind, def: FamilyDef, lines: () => string[]): Family {
    const name = def.name;
    if (!METRIC_NAME.test(name)) throw internal(`metric name '${name}' is not a valid Prometheus name`);
    if (kind === 'counter' && !name.endsWith('_total'))
      throw internal(`counter ${name}: a counter's name ends in _total`);
    if (kind !== 'counter' && name.endsWith('_total'))
      throw internal(`${kind} ${name}: only counters end in _total`);
    if (def.help.trim() === '') throw internal(`${name}: no help text`);
    const labels = def.labels ?? [];
    for (const l of labels) {
      if (!LABEL_NAME.test(l) || l.startsWith('__'))
        throw internal(`${name}: label name '${l}' is not a valid Prometheus label name`);
      if (kind === 'histogram' && l === 'le') throw internal(`${name}: a histogram cannot use label le`);
    }
    if (new Set(labels).size !== labels.length) throw internal(`${name}: a label name is repeated`);
    const names = kind === 'histogram' ? [name, `${name}_bucket`, `${name}_sum`, `${name}_count`] : [name];
    for (const n of names)
      if (this.series.has(n)) throw internal(`metric ${n} is declared twice (one family per name)`);
    names.forEach((n) => this.series.add(n));
    const f: Family = { kind, def, labels, lines };
    this.families.set(name, f);
    return f;
  }
}

/** The sample's labels must be exactly the family's. */
function keyOf(f: Family, labels: Labels): string {
  const keys = Object.keys(labels);
  if (keys.length !== f.labels.length || !f.labels.every((l) => l in labels))
    throw internal(
      `${f.def.name}: labels {${keys.join(',')}} do not match the declared {${f.labels.join(',')}}`,
    );
  return f.labels.map((l) => labels[l]).join('\u0000');
}

function line(name: string, labels: Labels, value: number): string {
  const keys = Object.keys(labels);
  const l = keys.length === 0 ? '' : `{${keys.map((k) => `${k}="${escValue(labels[k])}"`).join(',')}}`;
  return `${name}${l} ${fmt(value)}`;
}

function fmt(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

function escValue(v: string | undefined): string {
  return (v ?? '').replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function escHelp(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function internal(message: string): SpcdError {
  return new SpcdError('INTERNAL', message);
}
