import { formatAmount } from "../billing/money.ts";

/**
 * Counters and histograms with labels, kept as plain numbers and written in Prometheus's text
 * format (version 0.0.4) when scraped. Every request observes six series: prom-client hashes and
 * validates the label object on each call (about 30k machine instructions a request, a twentieth
 * of the gateway's own work), where these look their series up by the label values joined into
 * one string. Label names are fixed at creation; values are whatever the caller bounds them to.
 */

/** One series' label values, in the order of the metric's label names. */
type LabelValues = readonly string[];

interface CounterSeries {
  labels: LabelValues;
  value: number;
}

interface HistogramSeries {
  labels: LabelValues;
  /** Its label pairs as written (`a="x",b="y"`), made once: each scrape writes them on every bucket line. */
  pairs: string;
  /** Observations per bucket (not cumulative); the last one counts those above every bound. */
  counts: number[];
  sum: number;
  count: number;
}

/** The key of a series: its label values joined by a character no label value is made of. */
function keyOf(labels: LabelValues): string {
  return labels.length === 1 ? (labels[0] as string) : labels.join("\u0000");
}

function escapeLabelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (character) => (character === "\n" ? "\\n" : `\\${character}`));
}

function formatNumber(value: number): string {
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  if (value === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(value);
}

/** `{name="value",...}`, after `first` (a bucket's `le`, first as prom-client writes it) if given. */
function formatLabels(names: readonly string[], values: LabelValues, first?: string): string {
  const pairs = names.map((name, index) => `${name}="${escapeLabelValue(values[index] ?? "")}"`);
  if (first !== undefined) pairs.unshift(first);
  return pairs.length === 0 ? "" : `{${pairs.join(",")}}`;
}

function header(name: string, help: string, type: "counter" | "histogram"): string {
  return `# HELP ${name} ${help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}\n# TYPE ${name} ${type}\n`;
}

/**
 * A counter of money with labels: nano-units added exactly (bigint), written as the decimal the
 * ledger would sum to (a float counter drifted: 3 x 0.000053 showed as 0.00015900000000000002).
 */
export class LabeledAmountCounter {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly #series = new Map<string, { labels: LabelValues; nano: bigint }>();

  constructor(name: string, help: string, labelNames: readonly string[]) {
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
  }

  inc(labels: LabelValues, nano: bigint): void {
    if (nano < 0n) throw new RangeError(`${this.name}: a counter only goes up (got ${nano})`);
    const key = keyOf(labels);
    const series = this.#series.get(key);
    if (series === undefined) this.#series.set(key, { labels: [...labels], nano });
    else series.nano += nano;
  }

  render(): string {
    let text = header(this.name, this.help, "counter");
    for (const series of this.#series.values()) {
      text += `${this.name}${formatLabels(this.labelNames, series.labels)} ${formatAmount(series.nano)}\n`;
    }
    return text;
  }
}

/** A counter with labels: `inc(["a", "b"], 3)`. */
export class LabeledCounter {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly #series = new Map<string, CounterSeries>();

  constructor(name: string, help: string, labelNames: readonly string[]) {
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
  }

  inc(labels: LabelValues, amount = 1): void {
    if (!(amount >= 0)) throw new RangeError(`${this.name}: a counter only goes up (got ${amount})`);
    const key = keyOf(labels);
    const series = this.#series.get(key);
    if (series === undefined) this.#series.set(key, { labels: [...labels], value: amount });
    else series.value += amount;
  }

  render(): string {
    let text = header(this.name, this.help, "counter");
    for (const series of this.#series.values()) {
      text += `${this.name}${formatLabels(this.labelNames, series.labels)} ${formatNumber(series.value)}\n`;
    }
    return text;
  }
}

/** A histogram with labels and fixed upper bounds (ascending): `observe(["a"], 0.25)`. */
export class LabeledHistogram {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly #series = new Map<string, HistogramSeries>();
  readonly #bounds: readonly number[];

  constructor(name: string, help: string, labelNames: readonly string[], bounds: readonly number[]) {
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
    for (let index = 1; index < bounds.length; index++) {
      if (!((bounds[index] as number) > (bounds[index - 1] as number)))
        throw new RangeError(`${name}: bucket bounds must ascend`);
    }
    this.#bounds = bounds;
  }

  observe(labels: LabelValues, value: number): void {
    if (!Number.isFinite(value)) throw new RangeError(`${this.name}: cannot observe ${value}`);
    const key = keyOf(labels);
    let series = this.#series.get(key);
    if (series === undefined) {
      series = {
        labels: [...labels],
        pairs: this.labelNames
          .map((name, index) => `${name}="${escapeLabelValue(labels[index] ?? "")}"`)
          .join(","),
        counts: new Array<number>(this.#bounds.length + 1).fill(0),
        sum: 0,
        count: 0,
      };
      this.#series.set(key, series);
    }
    const bounds = this.#bounds;
    let bucket = 0;
    while (bucket < bounds.length && value > (bounds[bucket] as number)) bucket++;
    series.counts[bucket] = (series.counts[bucket] as number) + 1;
    series.sum += value;
    series.count += 1;
  }

  render(): string {
    let text = header(this.name, this.help, "histogram");
    // `name_bucket{le="bound"` for each bucket, made once per scrape, not once per series.
    const bucketStarts = [...this.#bounds.map(formatNumber), "+Inf"].map(
      (bound) => `${this.name}_bucket{le="${bound}"`,
    );
    for (const series of this.#series.values()) {
      const rest = series.pairs === "" ? "}" : `,${series.pairs}}`;
      let cumulative = 0;
      for (let bucket = 0; bucket < bucketStarts.length; bucket++) {
        cumulative += series.counts[bucket] as number;
        text += `${bucketStarts[bucket]}${rest} ${cumulative}\n`;
      }
      const labels = series.pairs === "" ? "" : `{${series.pairs}}`;
      text += `${this.name}_sum${labels} ${formatNumber(series.sum)}\n`;
      text += `${this.name}_count${labels} ${series.count}\n`;
    }
    return text;
  }
}
