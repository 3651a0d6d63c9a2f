import type { TargetResults } from "./measure-target.ts";

/** A plain-text table: a header row, a rule, then rows, columns padded to fit. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, column) =>
        column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0),
      )
      .join("  ");
  return [line(header), widths.map((width) => "-".repeat(width)).join("  "), ...rows.map(line)].join("\n");
}

const number = (value: number | undefined, digits = 0) =>
  value === undefined || Number.isNaN(value)
    ? "-"
    : value.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const ratio = (value: number, base: number | undefined) =>
  base === undefined || base === 0 ? "-" : (value / base).toFixed(2);
const added = (value: number, base: number | undefined) =>
  base === undefined ? "-" : `+${(value - base).toFixed(3)}`;

/** The two result tables and the SPEC §10 checks, as printed by the benchmark. */
export function formatReport(results: readonly TargetResults[]): string {
  const direct = results.find((result) => result.name.startsWith("direct"));
  const featureless = results.find((result) => result.name === "featureless proxy");
  const tollgate = results.find((result) => result.name === "tollgate");
  const portkey = results.find((result) => result.name === "portkey");

  const plain = table(
    [
      "non-streamed",
      "req/s @16",
      "req/s @50",
      "x direct",
      "x featureless",
      "p50 ms @1",
      "p99 ms @1",
      "added p50",
      "added p99",
      "CPU us/req",
      "peak RSS MB",
      "errors",
    ],
    results.map((result) => [
      result.name,
      number(result.plain.at16.requestsPerSecond),
      number(result.plain.at50.requestsPerSecond),
      ratio(result.plain.at50.requestsPerSecond, direct?.plain.at50.requestsPerSecond),
      ratio(result.plain.at50.requestsPerSecond, featureless?.plain.at50.requestsPerSecond),
      number(result.plain.single.p50Ms, 3),
      number(result.plain.single.p99Ms, 3),
      result === direct ? "-" : added(result.plain.single.p50Ms, direct?.plain.single.p50Ms),
      result === direct ? "-" : added(result.plain.single.p99Ms, direct?.plain.single.p99Ms),
      number(result.plain.cpuPerRequestUs),
      result.peakRssBytes === undefined ? "-" : number(result.peakRssBytes / 1024 / 1024),
      String(result.errors),
    ]),
  );
  const streamed = table(
    [
      "streamed",
      "first chunk ms",
      "added",
      "total ms (20 ch)",
      "added",
      "paced streams/s @32",
      "x direct",
      "CPU us/stream 20 ch",
      "200 ch",
      "us/chunk",
    ],
    results.map((result) => {
      const perChunk =
        result.stream.cpuPerStream20Us === undefined || result.stream.cpuPerStream200Us === undefined
          ? undefined
          : (result.stream.cpuPerStream200Us - result.stream.cpuPerStream20Us) / 180;
      return [
        result.name,
        number(result.stream.timings.firstChunkMs, 3),
        result === direct
          ? "-"
          : added(result.stream.timings.firstChunkMs, direct?.stream.timings.firstChunkMs),
        number(result.stream.timings.totalMs, 3),
        result === direct ? "-" : added(result.stream.timings.totalMs, direct?.stream.timings.totalMs),
        number(result.stream.paced.requestsPerSecond, 1),
        ratio(result.stream.paced.requestsPerSecond, direct?.stream.paced.requestsPerSecond),
        number(result.stream.cpuPerStream20Us),
        number(result.stream.cpuPerStream200Us),
        number(perChunk, 2),
      ];
    }),
  );

  const checks: string[] = [];
  if (tollgate !== undefined) {
    const check = (label: string, pass: boolean, detail: string) =>
      checks.push(`  [${pass ? "pass" : "FAIL"}] ${label}: ${detail}`);
    if (featureless !== undefined) {
      const value = tollgate.plain.at50.requestsPerSecond / featureless.plain.at50.requestsPerSecond;
      check("throughput >= 0.85 x featureless proxy @50", value >= 0.85, value.toFixed(2));
    }
    if (portkey !== undefined) {
      const value = tollgate.plain.at50.requestsPerSecond / portkey.plain.at50.requestsPerSecond;
      check("throughput >= 7 x Portkey @50", value >= 7, value.toFixed(1));
    }
    if (direct !== undefined) {
      const p50 = tollgate.plain.single.p50Ms - direct.plain.single.p50Ms;
      check("added p50 < 0.5 ms", p50 < 0.5, `${p50.toFixed(3)} ms`);
      const first = tollgate.stream.timings.firstChunkMs - direct.stream.timings.firstChunkMs;
      check("added time to first chunk < 1 ms", first < 1, `${first.toFixed(3)} ms`);
      const paced = tollgate.stream.paced.requestsPerSecond / direct.stream.paced.requestsPerSecond;
      check("paced stream throughput >= 0.9 x direct @32", paced >= 0.9, paced.toFixed(2));
    }
    if (tollgate.stream.cpuPerStream20Us !== undefined && tollgate.stream.cpuPerStream200Us !== undefined) {
      // Flat: a chunk beyond the 20th costs no more than the average chunk of a 20-chunk stream
      // (which also carries the stream's fixed cost); quadratic work would make it cost more.
      const marginal = (tollgate.stream.cpuPerStream200Us - tollgate.stream.cpuPerStream20Us) / 180;
      const average = tollgate.stream.cpuPerStream20Us / 20;
      check(
        "per-chunk CPU flat in stream length",
        marginal <= average,
        `${marginal.toFixed(1)} us per extra chunk vs ${average.toFixed(1)} us average at 20 chunks`,
      );
    }
    check("no errors under load", tollgate.errors === 0, String(tollgate.errors));
  }
  return [plain, "", streamed, "", "SPEC section 10 targets:", ...checks].join("\n");
}
