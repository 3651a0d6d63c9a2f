/**
 * `npm run bench -- local [--tokens N] [--rounds N] [--threads N] [--ttft-samples N]`
 *
 * The local engine against node-llama-cpp driven directly, in one run, on the same generated
 * model files and thread count (SPEC §10):
 * - throughput on the `small` test model: direct with one sequence, Tollgate non-streamed and
 *   streamed with one client (HTTP against a real server in this process); direct with four
 *   sequences in one context generating at once, Tollgate with 2, 4 and 8 concurrent clients
 *   (aggregate tokens/s). Rounds interleave the cases (in a rotating order) and ratios are the
 *   median of each round's ratio to that round's direct run, so load from other processes on the
 *   machine hits both sides alike.
 * - time to first token on the `tiny` model: direct (prompt text to first complete token) against
 *   a streamed Tollgate request (request sent to first content chunk).
 * - main-thread CPU per token and event-loop delay on both sides.
 * - memory of a server in a child process: idle with an empty catalogue, idle with only an
 *   unavailable local model, with the small model loaded, and after a burst of requests.
 * Both models are written with `endBias: 0`, so every request runs exactly `max_tokens` tokens.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { type ELDHistogram, monitorEventLoopDelay } from "node:perf_hooks";
import { getSharedLlama } from "../../src/engine/llama/get-shared-llama.ts";
import { resolveThreadCount } from "../../src/engine/llama/resolve-thread-count.ts";
import { type BenchModel, writeBenchModel } from "./bench-models.ts";
import { createBenchCatalogModel, startBenchServer, waitForModels } from "./bench-server.ts";
import { type ChatOutcome, createClientAgent, postChatCompletion } from "./chat-client.ts";
import { type BenchSampling, createDirectRunner, type DirectRunner } from "./direct-runner.ts";
import { type ServerChildOptions, startServerChild } from "./server-child.ts";
import {
  formatMegabytes,
  formatNumber,
  formatTable,
  median,
  percentile,
  readThreadCpuMicroseconds,
} from "./statistics.ts";

interface LocalBenchOptions {
  /** Completion tokens per request. */
  tokens: number;
  rounds: number;
  /** `undefined`: Tollgate's default (physical cores minus one, at least one). */
  threads: number | undefined;
  ttftSamples: number;
}

/** One timed run of a case. */
interface RunResult {
  tokens: number;
  milliseconds: number;
  /** Main-thread CPU time during the run, in milliseconds. */
  mainThreadMilliseconds: number | undefined;
}

/** Every run of one case, with the event-loop delay recorded while it ran. */
interface CaseRecord {
  label: string;
  runs: RunResult[];
  delay: ELDHistogram;
}

const SMALL_MODEL = "bench-small";
const TINY_MODEL = "bench-tiny";
/** Per-sequence context on both sides: the prompt plus any `--tokens` up to about 1,900. */
const CONTEXT_LENGTH = 2048;
const BATCH_SIZE = 512;
const PARALLEL = 4;
const sampling: BenchSampling = { temperature: 0.7, topP: 1, seed: 1234 };
const messages = [
  { role: "system" as const, content: "You are a helpful assistant." },
  { role: "user" as const, content: "Write a long story about a lighthouse keeper and a cat." },
];

export async function run(args: string[]): Promise<void> {
  const options = parseArguments(args);
  const startedAt = performance.now();
  const loadBefore = loadavg();
  const folder = mkdtempSync(join(tmpdir(), "tollgate-bench-local-"));
  const say = (text: string) => process.stderr.write(`[local ${formatSeconds(startedAt)}] ${text}\n`);
  try {
    say("writing the test models (small: throughput, tiny: time to first token)");
    const small = await writeBenchModel({ folder, size: "small", endBias: 0 });
    const tiny = await writeBenchModel({ folder, size: "tiny", endBias: 0 });
    const llama = await getSharedLlama({ gpu: false });
    const threads = resolveThreadCount({ configured: options.threads, llama });

    say(`starting Tollgate and the direct contexts (${threads} thread${threads === 1 ? "" : "s"})`);
    const server = await startBenchServer({
      folder,
      models: [
        createBenchCatalogModel({
          id: SMALL_MODEL,
          path: small.path,
          parallel: PARALLEL,
          threads,
          contextLength: CONTEXT_LENGTH,
        }),
        createBenchCatalogModel({
          id: TINY_MODEL,
          path: tiny.path,
          parallel: PARALLEL,
          threads,
          contextLength: CONTEXT_LENGTH,
        }),
      ],
    });
    const agent = createClientAgent();
    let throughput: ThroughputReport;
    let ttft: TtftReport;
    try {
      await waitForModels({ baseUrl: server.baseUrl, key: server.key, ids: [SMALL_MODEL, TINY_MODEL] });
      const history = messages.map((message) => ({ type: message.role, text: message.content }));
      const directOptions = { llama, contextSize: CONTEXT_LENGTH, threads, batchSize: BATCH_SIZE, history };
      const directSingle = await createDirectRunner({
        ...directOptions,
        modelPath: small.path,
        sequences: 1,
      });
      const directBatch = await createDirectRunner({ ...directOptions, modelPath: small.path, sequences: 4 });
      const directTiny = await createDirectRunner({ ...directOptions, modelPath: tiny.path, sequences: 1 });
      try {
        const client = { baseUrl: server.baseUrl, key: server.key, agent };
        throughput = await measureThroughput({ options, client, directSingle, directBatch, say });
        ttft = await measureTimeToFirstToken({ options, client, directTiny, say });
      } finally {
        await directSingle.dispose();
        await directBatch.dispose();
        await directTiny.dispose();
      }
    } finally {
      agent.destroy();
      await server.close();
    }

    const memory = await measureMemory({ folder, small, threads, tokens: options.tokens, say });
    printReport({
      options,
      threads,
      cpuMathCores: llama.cpuMathCores,
      small,
      tiny,
      throughput,
      ttft,
      memory,
      loadBefore,
      seconds: (performance.now() - startedAt) / 1000,
    });
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

function parseArguments(args: string[]): LocalBenchOptions {
  const options: LocalBenchOptions = { tokens: 128, rounds: 5, threads: undefined, ttftSamples: 40 };
  for (let index = 0; index < args.length; index += 2) {
    const name = args[index];
    const value = Number(args[index + 1]);
    if (!Number.isInteger(value) || value < 1) throw new Error(`${name} needs a whole number of at least 1`);
    switch (name) {
      case "--tokens":
        options.tokens = Math.min(value, 1800);
        break;
      case "--rounds":
        options.rounds = value;
        break;
      case "--threads":
        options.threads = value;
        break;
      case "--ttft-samples":
        options.ttftSamples = value;
        break;
      default:
        throw new Error(`unknown option ${name}; use --tokens, --rounds, --threads or --ttft-samples`);
    }
  }
  return options;
}

function formatSeconds(since: number): string {
  return `${((performance.now() - since) / 1000).toFixed(0)}s`;
}

interface BenchClient {
  baseUrl: string;
  key: string;
  agent: ReturnType<typeof createClientAgent>;
}

/** Times `work` and records its main-thread CPU and the event-loop delay while it runs. */
async function timeRun(record: CaseRecord, work: () => Promise<number>): Promise<void> {
  const cpuBefore = readThreadCpuMicroseconds();
  record.delay.enable();
  const started = performance.now();
  const tokens = await work();
  const milliseconds = performance.now() - started;
  record.delay.disable();
  const cpuAfter = readThreadCpuMicroseconds();
  record.runs.push({
    tokens,
    milliseconds,
    mainThreadMilliseconds:
      cpuBefore === undefined || cpuAfter === undefined ? undefined : (cpuAfter - cpuBefore) / 1000,
  });
}

/** Runs `clients` clients at once, each making one request; returns the completion tokens. */
async function runClients(options: {
  client: BenchClient;
  clients: number;
  tokens: number;
  stream: boolean;
}): Promise<number> {
  const outcomes = await Promise.all(
    Array.from({ length: options.clients }, (_, index) =>
      postChatCompletion({
        ...options.client,
        body: {
          model: SMALL_MODEL,
          messages,
          max_tokens: options.tokens,
          temperature: sampling.temperature,
          top_p: sampling.topP,
          seed: sampling.seed + index,
          stream: options.stream,
        },
      }),
    ),
  );
  return sumTokens(outcomes);
}

function sumTokens(outcomes: readonly ChatOutcome[]): number {
  let tokens = 0;
  for (const outcome of outcomes) {
    if (outcome.status !== 200 || outcome.errorCode !== undefined) {
      throw new Error(`request failed: status ${outcome.status}, ${outcome.errorCode ?? "no error code"}`);
    }
    tokens += outcome.completionTokens;
  }
  return tokens;
}

interface ThroughputCase {
  record: CaseRecord;
  /** The case this one's ratio is taken against (the direct run of the same round). */
  baseline: CaseRecord | undefined;
  target: number | undefined;
  work: () => Promise<number>;
}

interface ThroughputReport {
  cases: ThroughputCase[];
  promptTokens: number;
}

async function measureThroughput(options: {
  options: LocalBenchOptions;
  client: BenchClient;
  directSingle: DirectRunner;
  directBatch: DirectRunner;
  say: (text: string) => void;
}): Promise<ThroughputReport> {
  const { tokens, rounds } = options.options;
  const { client } = options;
  const record = (label: string): CaseRecord => ({
    label,
    runs: [],
    delay: monitorEventLoopDelay({ resolution: 1 }),
  });
  const single = record("direct node-llama-cpp, 1 sequence");
  const batch = record("direct node-llama-cpp, 4 sequences at once");
  const singleCases: ThroughputCase[] = [
    {
      record: single,
      baseline: undefined,
      target: undefined,
      work: async () => (await options.directSingle.generate({ tokens, sampling })).tokens,
    },
    {
      record: record("Tollgate, 1 client, non-streamed"),
      baseline: single,
      target: 0.95,
      work: () => runClients({ client, clients: 1, tokens, stream: false }),
    },
    {
      record: record("Tollgate, 1 client, streamed"),
      baseline: single,
      target: 0.95,
      work: () => runClients({ client, clients: 1, tokens, stream: true }),
    },
  ];
  const concurrentCases: ThroughputCase[] = [
    {
      record: batch,
      baseline: undefined,
      target: undefined,
      work: async () => (await options.directBatch.generate({ tokens, sampling })).tokens,
    },
    ...[2, 4, 8].map(
      (clients): ThroughputCase => ({
        record: record(`Tollgate, ${clients} clients at once, streamed`),
        baseline: batch,
        target: clients === 4 ? 0.9 : undefined,
        work: () => runClients({ client, clients, tokens, stream: true }),
      }),
    ),
  ];

  // One untimed run of each case: the first generation of a context pays one-time costs.
  const probe = await postChatCompletion({
    ...client,
    body: { model: SMALL_MODEL, messages, max_tokens: 1, temperature: 0 },
  });
  for (const each of [...singleCases, ...concurrentCases]) await each.work();
  for (let round = 0; round < rounds; round++) {
    options.say(`throughput round ${round + 1} of ${rounds}`);
    for (const group of [singleCases, concurrentCases]) {
      // A rotating order, so no case always runs right after the same other case.
      for (let offset = 0; offset < group.length; offset++) {
        const each = group[(round + offset) % group.length];
        if (each !== undefined) await timeRun(each.record, each.work);
      }
    }
  }
  return { cases: [...singleCases, ...concurrentCases], promptTokens: probe.promptTokens };
}

interface TtftReport {
  direct: number[];
  tollgate: number[];
}

async function measureTimeToFirstToken(options: {
  options: LocalBenchOptions;
  client: BenchClient;
  directTiny: DirectRunner;
  say: (text: string) => void;
}): Promise<TtftReport> {
  options.say(`time to first token, ${options.options.ttftSamples} samples per side`);
  const report: TtftReport = { direct: [], tollgate: [] };
  const tollgate = async () => {
    const outcome = await postChatCompletion({
      ...options.client,
      body: {
        model: TINY_MODEL,
        messages,
        max_tokens: 4,
        temperature: sampling.temperature,
        top_p: sampling.topP,
        seed: sampling.seed,
        stream: true,
      },
    });
    if (outcome.firstContentMilliseconds === undefined) throw new Error("a stream without content");
    return outcome.firstContentMilliseconds;
  };
  for (let warmup = 0; warmup < 3; warmup++) {
    await options.directTiny.timeToFirstText(sampling);
    await tollgate();
  }
  for (let sample = 0; sample < options.options.ttftSamples; sample++) {
    report.direct.push(await options.directTiny.timeToFirstText(sampling));
    report.tollgate.push(await tollgate());
  }
  return report;
}

interface MemoryReport {
  idleEmpty: number;
  idleUnavailable: number;
  loaded: number;
  afterLoad: number;
  /** Event-loop delay in the server process during the burst. */
  burstDelay: { p50: number; p99: number; max: number };
}

async function measureMemory(options: {
  folder: string;
  small: BenchModel;
  threads: number;
  tokens: number;
  say: (text: string) => void;
}): Promise<MemoryReport> {
  const idle = async (childOptions: ServerChildOptions) => {
    const child = await startServerChild(childOptions);
    try {
      // A few requests, so the HTTP path is warm as it is on a server that has served some.
      for (let request = 0; request < 5; request++) {
        await fetch(`${child.baseUrl}/models`, { headers: { authorization: `Bearer ${child.key}` } });
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
      return (await child.sample()).rss;
    } finally {
      await child.stop();
    }
  };
  options.say("memory: idle server, empty catalogue");
  const idleEmpty = await idle({ folder: join(options.folder, "idle-empty"), models: [] });
  options.say("memory: idle server, only an unavailable local model");
  const idleUnavailable = await idle({
    folder: join(options.folder, "idle-unavailable"),
    models: [],
    withUnavailableModel: true,
  });
  options.say("memory: small model loaded, then 16 streamed requests, 8 at a time");
  const child = await startServerChild({
    folder: join(options.folder, "loaded"),
    models: [
      {
        id: SMALL_MODEL,
        path: options.small.path,
        parallel: PARALLEL,
        threads: options.threads,
        contextLength: CONTEXT_LENGTH,
      },
    ],
  });
  const agent = createClientAgent();
  try {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const loaded = (await child.sample()).rss;
    const client = { baseUrl: child.baseUrl, key: child.key, agent };
    for (let burst = 0; burst < 2; burst++) {
      await runClients({ client, clients: 8, tokens: options.tokens, stream: true });
    }
    const duringBurst = await child.sample();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const afterLoad = (await child.sample()).rss;
    return {
      idleEmpty,
      idleUnavailable,
      loaded,
      afterLoad,
      burstDelay: duringBurst.eventLoopDelay,
    };
  } finally {
    agent.destroy();
    await child.stop();
  }
}

function tokensPerSecond(run: RunResult): number {
  return (run.tokens / run.milliseconds) * 1000;
}

function printReport(report: {
  options: LocalBenchOptions;
  threads: number;
  cpuMathCores: number;
  small: BenchModel;
  tiny: BenchModel;
  throughput: ThroughputReport;
  ttft: TtftReport;
  memory: MemoryReport;
  loadBefore: number[];
  seconds: number;
}): void {
  const { options, throughput, ttft, memory } = report;
  const verdict = (value: number, target: number | undefined, higherIsBetter = true) => {
    if (target === undefined || !Number.isFinite(value)) return "";
    return (higherIsBetter ? value >= target : value < target) ? "ok" : "MISSED";
  };
  const out: string[] = [];
  out.push("");
  out.push(
    `Local engine: Tollgate against node-llama-cpp, ${cpus()[0]?.model ?? "unknown CPU"} (${cpus().length} CPUs, ${report.cpuMathCores} math cores), Node ${process.version}`,
  );
  out.push(
    `threads ${report.threads} on both sides; context ${CONTEXT_LENGTH} tokens per sequence; batch ${BATCH_SIZE}; Tollgate parallel ${PARALLEL}`,
  );
  out.push(
    `small model ${(report.small.parameters / 1e6).toFixed(1)}M parameters (throughput), tiny ${(report.tiny.parameters / 1e6).toFixed(1)}M (time to first token), endBias 0`,
  );
  out.push(
    `${options.tokens} completion tokens per request, prompt ${throughput.promptTokens} tokens, ${options.rounds} interleaved rounds; load average before ${report.loadBefore.map((value) => value.toFixed(2)).join(" ")}, after ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}`,
  );
  out.push("");

  const rows = throughput.cases.map((each) => {
    const rates = each.record.runs.map(tokensPerSecond);
    const ratios =
      each.baseline === undefined
        ? []
        : each.record.runs.map((run, index) => {
            const base = each.baseline?.runs[index];
            return base === undefined ? Number.NaN : tokensPerSecond(run) / tokensPerSecond(base);
          });
    const ratio = each.baseline === undefined ? 1 : median(ratios);
    const cpu = each.record.runs.map((run) =>
      run.mainThreadMilliseconds === undefined ? Number.NaN : run.mainThreadMilliseconds / run.tokens,
    );
    const delay = each.record.delay;
    return [
      each.record.label,
      formatNumber(median(rates)),
      `${formatNumber(Math.min(...rates))}-${formatNumber(Math.max(...rates))}`,
      formatNumber(ratio, 3),
      each.target === undefined ? "" : `>= ${each.target}`,
      verdict(ratio, each.target),
      formatNumber(median(cpu), 3),
      `${formatNumber(delay.percentile(50) / 1e6, 1)}/${formatNumber(delay.percentile(99) / 1e6, 1)}/${formatNumber(delay.max / 1e6, 1)}`,
    ];
  });
  out.push(
    formatTable(
      [
        "case (small model)",
        "tokens/s",
        "range",
        "ratio",
        "target",
        "",
        "main-thread CPU ms/token",
        "event-loop delay p50/p99/max ms",
      ],
      rows,
    ),
  );
  out.push("ratio: median over rounds of tokens/s divided by the same round's direct run above it");
  out.push("");

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
  );
  out.push("");

  const mb = 2 ** 20;
  out.push(
    formatTable(
      ["memory (server in a child process)", "RSS", "target", ""],
      [
        [
          "idle, empty catalogue",
          formatMegabytes(memory.idleEmpty),
          "< 150 MB",
          verdict(memory.idleEmpty / mb, 150, false),
        ],
        ["idle, only an unavailable local model", formatMegabytes(memory.idleUnavailable), "", ""],
        ["small model loaded (parallel 4)", formatMegabytes(memory.loaded), "", ""],
        ["after 16 streamed requests, 8 at a time", formatMegabytes(memory.afterLoad), "", ""],
      ],
    ),
  );
  out.push(
    `server event-loop delay during those requests: p50 ${formatNumber(memory.burstDelay.p50, 1)} ms, p99 ${formatNumber(memory.burstDelay.p99, 1)} ms, max ${formatNumber(memory.burstDelay.max, 1)} ms`,
  );
  out.push(`(${report.seconds.toFixed(0)} s)`);
  process.stdout.write(`${out.join("\n")}\n`);
}
