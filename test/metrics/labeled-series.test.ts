import { Counter, Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { LabeledCounter, LabeledHistogram } from "../../src/metrics/labeled-series.ts";

/** The sample lines of a text exposition, sorted (HELP and TYPE lines kept apart). */
function samples(text: string): string[] {
  return text
    .split("\n")
    .filter((line) => line !== "" && !line.startsWith("#"))
    .sort();
}

describe("labeled series", () => {
  it("write what prom-client writes for the same observations", async () => {
    const registry = new Registry();
    const reference = new Histogram({
      name: "h_seconds",
      help: "A histogram.",
      labelNames: ["route", "model"],
      buckets: [0.001, 0.5, 1],
      registers: [registry],
    });
    const referenceCounter = new Counter({
      name: "c_total",
      help: "A counter.",
      labelNames: ["model", "status"],
      registers: [registry],
    });
    const histogram = new LabeledHistogram("h_seconds", "A histogram.", ["route", "model"], [0.001, 0.5, 1]);
    const counter = new LabeledCounter("c_total", "A counter.", ["model", "status"]);
    // On a bound, below every bound, above every bound; odd label values that need escaping.
    const observations: [string, string, number][] = [
      ["/v1/chat", "tiny", 0.5],
      ["/v1/chat", "tiny", 0.0001],
      ["/v1/chat", 'we"ird\\model\nx', 7],
      ["/v1/models", "", 0.75],
    ];
    for (const [route, model, value] of observations) {
      reference.observe({ route, model }, value);
      histogram.observe([route, model], value);
      referenceCounter.inc({ model, status: "200" }, 2);
      counter.inc([model, "200"], 2);
    }
    const expected = samples(await registry.metrics());
    expect(samples(histogram.render() + counter.render())).toEqual(expected);
    expect(histogram.render()).toMatch(/^# HELP h_seconds A histogram\.\n# TYPE h_seconds histogram\n/);
    expect(counter.render()).toContain("# TYPE c_total counter\n");
  });

  it("cumulate the buckets and keep each label set apart", () => {
    const histogram = new LabeledHistogram("h", "H.", ["model"], [1, 2]);
    histogram.observe(["a"], 1);
    histogram.observe(["a"], 1.5);
    histogram.observe(["a"], 3);
    histogram.observe(["b"], 0);
    expect(samples(histogram.render())).toEqual(
      [
        'h_bucket{le="1",model="a"} 1',
        'h_bucket{le="2",model="a"} 2',
        'h_bucket{le="+Inf",model="a"} 3',
        'h_sum{model="a"} 5.5',
        'h_count{model="a"} 3',
        'h_bucket{le="1",model="b"} 1',
        'h_bucket{le="2",model="b"} 1',
        'h_bucket{le="+Inf",model="b"} 1',
        'h_sum{model="b"} 0',
        'h_count{model="b"} 1',
      ].sort(),
    );
  });

  it("refuse what Prometheus cannot hold", () => {
    expect(() => new LabeledCounter("c", "C.", []).inc([], -1)).toThrow(RangeError);
    expect(() => new LabeledHistogram("h", "H.", [], [1]).observe([], Number.NaN)).toThrow(RangeError);
    expect(() => new LabeledHistogram("h", "H.", [], [2, 1])).toThrow(RangeError);
  });
});
