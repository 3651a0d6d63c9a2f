import { cpus, loadavg } from "node:os";
import type { BenchModel } from "./bench-models.ts";
import {
  BATCH_SIZE,
  CONTEXT_LENGTH,
  type LocalBenchOptions,
  PARALLEL,
  type RunResult,
  tokensPerSecond,
} from "./local-bench-setup.ts";
import type { MemoryReport } from "./measure-memory.ts";
import { countShortRuns, type PairedCase, pairedRatio, pairRatios } from "./measure-throughput.ts";
import type { TimeToFirstTokenReport } from "./measure-time-to-first-token.ts";
import { formatMegabytes, formatNumber, formatTable, median, percentile } from "./statistics.ts";

/** Everything one run measured. */
export interface LocalBenchReport {
  options: LocalBenchOptions;
  threads: number;
  cpuMathCores: number;
  small: BenchModel;
  tiny: BenchModel;
  promptTokens: number;
  throughput: PairedCase[];
  ttft: TimeToFirstTokenReport;
  memory: MemoryReport;
  loadBefore: number[];
  seconds: number;
}

function verdict(value: number, target: number | undefined, higherIsBetter = true): string {
  if (target === undefined || !Number.isFinite(value)) return "";
  return (higherIsBetter ? value >= target : value < target) ? "ok" : "MISSED";
}

function describeRuns(runs: readonly RunResult[]): string[] {
  const rates = runs.map(tokensPerSecond);
  const cpu = runs.map((run) =>
    run.mainThreadMilliseconds === undefined ? Number.NaN : run.mainThreadMilliseconds / run.tokens,
  );
  return [
    formatNumber(median(rates)),
    `${formatNumber(Math.min(...rates))}-${formatNumber(Math.max(...rates))}`,
    formatNumber(median(cpu), 3),
    `${formatNumber(median(runs.map((run) => run.delay.p50)))}/${formatNumber(median(runs.map((run) => run.delay.p99)))}/${formatNumber(Math.max(...runs.map((run) => run.delay.max)))}`,
  ];
}

/** The report as text: a header, the throughput table, time to first token, memory. */
export function formatLocalReport(report: LocalBenchReport): string {
  const { options, throughput, ttft, memory } = report;
  const out: string[] = [""];
  const formatLoad = (values: number[]) => values.map((value) => value.toFixed(2)).join(" ");
  out.push(
    `Local engine: Tollgate against node-llama-cpp, ${cpus()[0]?.model ?? "unknown CPU"} (${cpus().length} CPUs, ${report.cpuMathCores} math cores), Node ${process.version}`,
    `threads ${report.threads} on both sides; context ${CONTEXT_LENGTH} tokens per sequence; batch ${BATCH_SIZE}; Tollgate parallel ${PARALLEL}; server in its own process, clients in the benchmark's`,
    `small model ${(report.small.parameters / 1e6).toFixed(1)}M parameters (throughput), tiny ${(report.tiny.parameters / 1e6).toFixed(1)}M (time to first token), both endBias 0`,
    `${options.tokens} completion tokens per request, prompt ${report.promptTokens} tokens, ${options.rounds} rounds of pairs; load average before ${formatLoad(report.loadBefore)}, after ${formatLoad(loadavg())}`,
    "",
  );

  const rows: string[][] = [];
  const shownBaselines = new Set<string>();
  for (const paired of throughput) {
    if (!shownBaselines.has(paired.baselineLabel)) {
      shownBaselines.add(paired.baselineLabel);
      const baselineRuns = throughput
        .filter((other) => other.baselineLabel === paired.baselineLabel)
        .flatMap((other) => other.baselineRuns);
      const [rate, range, cpu, delay] = describeRuns(baselineRuns);
      rows.push([paired.baselineLabel, rate ?? "", range ?? "", "1", "", "", "", cpu ?? "", delay ?? ""]);
    }
    const ratio = pairedRatio(paired);
    const ratios = pairRatios(paired);
    const [rate, range, cpu, delay] = describeRuns(paired.runs);
    rows.push([
      `  ${paired.label}`,
      rate ?? "",
      range ?? "",
      formatNumber(ratio, 3),
      `${formatNumber(percentile(ratios, 0.25), 2)}-${formatNumber(percentile(ratios, 0.75), 2)} (${ratios.length})`,
      paired.target === undefined ? "" : `>= ${paired.target}`,
      verdict(ratio, paired.target),
      cpu ?? "",
      delay ?? "",
    ]);
  }
  out.push(
    formatTable(
      [
        "case (small model)",
        "tokens/s",
        "range",
        "ratio",
        "middle half (pairs)",
        "target",
        "",
        "main-thread CPU ms/token",
        "loop delay p50/p99/max ms",
      ],
      rows,
    ),
    "tokens/s: median over rounds. ratio: median over pairs of tokens/s against the direct run of the same pair",
    "(the direct line above the case). main-thread CPU and loop delay: Tollgate's server process on its lines.",
  );
  const short = throughput.filter((paired) => countShortRuns(paired) > 0);
  out.push(
    short.length === 0
      ? `every run generated exactly ${options.tokens} tokens per request`
      : `RUNS ENDED EARLY (ratios unreliable): ${short.map((paired) => `${paired.label}: ${countShortRuns(paired)}`).join("; ")}`,
    "",
  );

  const directTtft = median(ttft.direct);
  const tollgateTtft = median(ttft.tollgate);
  const added = tollgateTtft - directTtft;
  out.push(
    formatTable(
      ["time to first token (tiny model)", "p50 ms", "p90 ms", "added p50 ms", "target", ""],
      [
        [
          "direct node-llama-cpp",
          formatNumber(directTtft, 2),
          formatNumber(percentile(ttft.direct, 0.9), 2),
          "",
          "",
          "",
        ],
        [
          "Tollgate, streamed",
          formatNumber(tollgateTtft, 2),
          formatNumber(percentile(ttft.tollgate, 0.9), 2),
          formatNumber(added, 2),
          "< 5",
          verdict(added, 5, false),
        ],
      ],
    ),
    "",
  );

  const megabyte = 2 ** 20;
  out.push(
    formatTable(
      ["memory (server in a child process)", "RSS", "target", ""],
      [
        [
          "idle, empty catalogue",
          formatMegabytes(memory.idleEmpty),
          "< 150 MB",
          verdict(memory.idleEmpty / megabyte, 150, false),
        ],
        ["idle, only an unavailable local model", formatMegabytes(memory.idleUnavailable), "", ""],
        ["small model loaded (parallel 4)", formatMegabytes(memory.loaded), "", ""],
        ["after 16 streamed requests, 8 at a time", formatMegabytes(memory.afterLoad), "", ""],
      ],
    ),
    `server event-loop delay during those requests: p50 ${formatNumber(memory.burstDelay.p50)} ms, p99 ${formatNumber(memory.burstDelay.p99)} ms, max ${formatNumber(memory.burstDelay.max)} ms`,
    `(${report.seconds.toFixed(0)} s)`,
  );
  return `${out.join("\n")}\n`;
}
