/**
 * `npm run bench -- soak [--minutes N] [--clients N] [--seed N]`
 *
 * A bounded soak of the local engine: a real server in a child process serves the tiny test model
 * (parallel 4) while `clients` clients send a seeded mix of plain, streamed, aborted-stream, tool
 * and JSON requests for `minutes` (default 10). The server process is sampled every few seconds:
 * RSS, event-loop delay, active handles (`process.getActiveResourcesInfo()`), and the engine's
 * leased, free and waiting sequences. The report says whether RSS stayed within 10 % after the
 * warm-up, and whether handles or leased sequences grew (idle before against idle after; the
 * idle baseline is taken after a priming burst that starts the server's lasting resources).
 */
import { mkdtempSync, rmSync } from "node:fs";
import type { Agent } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { START_AFTER_WRITES } from "../../src/store/sqlite/start-checkpointer.ts";
import { writeBenchModel } from "../local/bench-models.ts";
import { createClientAgent, postChatCompletion } from "../local/chat-client.ts";
import { type ServerSample, startServerChild } from "../local/server-child.ts";
import { formatMegabytes, formatNumber, formatTable } from "../local/statistics.ts";
import { createSoakTally, runSoakClient, type SoakTally } from "./soak-load.ts";

interface SoakOptions {
  minutes: number;
  clients: number;
  seed: number;
}

interface TimedSample {
  /** Seconds since the load started. */
  seconds: number;
  sample: ServerSample;
}

const MODEL = "soak-tiny";
const PARALLEL = 4;
/** RSS after a full collection may move this much (either way) from its first value after warm-up. */
const rssTolerance = 0.1;

export async function run(args: string[]): Promise<void> {
  const options = parseArguments(args);
  const durationSeconds = options.minutes * 60;
  // V8 enlarges its young generation (RSS +40 MB or so) 30 to 60 s into the load: part of the warm-up.
  const warmupSeconds = Math.min(120, Math.max(60, durationSeconds * 0.2));
  const sampleSeconds = Math.max(1, Math.min(10, durationSeconds / 60));
  // A full collection before some samples (see describeRss): about 20 over the run.
  const collectSeconds = Math.max(10, Math.min(60, durationSeconds / 20));
  const folder = mkdtempSync(join(tmpdir(), "tollgate-bench-soak-"));
  const startedAt = performance.now();
  const say = (text: string) =>
    process.stderr.write(`[soak ${((performance.now() - startedAt) / 1000).toFixed(0)}s] ${text}\n`);
  try {
    // The default end bias: answers end by themselves at varied lengths, as real ones do.
    const model = await writeBenchModel({ folder, size: "tiny", endBias: 8 });
    const child = await startServerChild({
      folder,
      models: [
        { id: MODEL, path: model.path, parallel: PARALLEL, threads: 1, contextLength: 2048, maxQueue: 64 },
      ],
    });
    const samples: TimedSample[] = [];
    const tally = createSoakTally();
    let idleBefore: ServerSample;
    let idleAfter: ServerSample;
    try {
      // The server's lasting resources start before the idle baseline, so that the baseline
      // holds them too: the SQLite checkpoint worker (a thread, one MessagePort handle) starts
      // after START_AFTER_WRITES settles and stays.
      const primeAgent = createClientAgent();
      await primeServer(child.baseUrl, child.key, primeAgent);
      primeAgent.destroy();
      await new Promise((resolve) => setTimeout(resolve, 1000));
      idleBefore = await child.sample({ collect: true });
      say(
        `${options.clients} clients for ${options.minutes} min (warm-up ${warmupSeconds} s, a sample every ${sampleSeconds} s, after a full collection every ${collectSeconds} s)`,
      );
      const agent = createClientAgent();
      const loadStartedAt = performance.now();
      const deadline = loadStartedAt + durationSeconds * 1000;
      const clients = Array.from({ length: options.clients }, (_, index) =>
        runSoakClient({
          baseUrl: child.baseUrl,
          key: child.key,
          agent,
          model: MODEL,
          seed: options.seed + index,
          deadline,
          tally,
        }),
      );
      let lastReport = 0;
      let lastCollect = 0;
      while (performance.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, sampleSeconds * 1000));
        const seconds = (performance.now() - loadStartedAt) / 1000;
        const collect = seconds - lastCollect >= collectSeconds;
        if (collect) lastCollect = seconds;
        const sample = await child.sample({ collect });
        samples.push({ seconds, sample });
        if (seconds - lastReport >= 30) {
          lastReport = seconds;
          say(
            `RSS ${formatMegabytes(sample.rss)}, loop delay p99 ${formatNumber(sample.eventLoopDelay.p99)} ms, ${totalRequests(tally)} requests`,
          );
        }
      }
      await Promise.all(clients);
      agent.destroy();
      // Let the server see the clients' sockets close, and aborted generations hand back sequences.
      await new Promise((resolve) => setTimeout(resolve, 2000));
      idleAfter = await child.sample({ collect: true });
    } finally {
      await child.stop();
    }
    printReport({ options, warmupSeconds, samples, tally, idleBefore, idleAfter });
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

/** Sends START_AFTER_WRITES + 20 one-token requests, PARALLEL at a time. */
async function primeServer(baseUrl: string, key: string, agent: Agent): Promise<void> {
  let remaining = START_AFTER_WRITES + 20;
  const worker = async () => {
    while (remaining > 0) {
      remaining -= 1;
      const outcome = await postChatCompletion({
        baseUrl,
        key,
        agent,
        body: { model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 1 },
      });
      if (outcome.status !== 200) throw new Error(`priming the server: status ${outcome.status}`);
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
}

function parseArguments(args: string[]): SoakOptions {
  const options: SoakOptions = { minutes: 10, clients: 6, seed: 1 };
  for (let index = 0; index < args.length; index += 2) {
    const name = args[index];
    const value = Number(args[index + 1]);
    if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} needs a positive number`);
    switch (name) {
      case "--minutes":
        options.minutes = Math.min(value, 24 * 60);
        break;
      case "--clients":
        options.clients = Math.floor(value);
        break;
      case "--seed":
        options.seed = Math.floor(value);
        break;
      default:
        throw new Error(`unknown option ${name}; use --minutes, --clients or --seed`);
    }
  }
  return options;
}

function totalRequests(tally: SoakTally): number {
  return Object.values(tally.requests).reduce((sum, count) => sum + count, 0);
}

function countHandles(sample: ServerSample): number {
  return Object.values(sample.activeResources).reduce((sum, count) => sum + count, 0);
}

function describeHandles(sample: ServerSample): string {
  return Object.entries(sample.activeResources)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([type, count]) => `${type} ${count}`)
    .join(", ");
}

function describeSequences(sample: ServerSample): string {
  return sample.engines
    .map((engine) => `${engine.leased} leased, ${engine.free} free, ${engine.waiting} waiting`)
    .join("; ");
}

/**
 * Whether RSS stayed flat after the warm-up. Raw RSS follows V8's collection cycle (the young
 * generation resizes, and dead objects pile up in the old one until a full collection), so the
 * verdict uses the samples taken right after a full collection, which show what the process
 * retains: flat when each is within 10 % of the first one after the warm-up. The raw range is
 * reported beside it.
 */
function describeRss(samples: readonly TimedSample[], warmupSeconds: number): string[] {
  const steady = samples.filter(({ seconds }) => seconds > warmupSeconds);
  const collected = steady.filter(({ sample }) => sample.collected);
  const [first] = collected;
  if (first === undefined || collected.length < 2) {
    return ["RSS: too few samples after a full collection past the warm-up to judge (run longer)"];
  }
  const reference = first.sample.rss;
  const deviation = Math.max(...collected.map(({ sample }) => Math.abs(sample.rss / reference - 1)));
  const slope = slopePerMinute(
    collected.map(({ seconds, sample }) => ({ x: seconds, y: sample.rss / 2 ** 20 })),
  );
  const raw = steady.map(({ sample }) => sample.rss);
  return [
    `RSS after a full collection, past the warm-up: ${collected.map(({ seconds, sample }) => `${(sample.rss / 2 ** 20).toFixed(0)} (${seconds.toFixed(0)} s)`).join(", ")} MB; trend ${slope >= 0 ? "+" : ""}${slope.toFixed(2)} MB/min`,
    `RSS: at most ${(deviation * 100).toFixed(1)} % from the first: ${deviation <= rssTolerance ? "flat within 10 %" : "NOT flat within 10 %"} (raw samples between collections: ${formatMegabytes(Math.min(...raw))} to ${formatMegabytes(Math.max(...raw))})`,
  ];
}

/** Least-squares slope of `values` over `seconds`, per minute. */
function slopePerMinute(points: readonly { x: number; y: number }[]): number {
  if (points.length < 2) return 0;
  const meanX = points.reduce((sum, point) => sum + point.x, 0) / points.length;
  const meanY = points.reduce((sum, point) => sum + point.y, 0) / points.length;
  let numerator = 0;
  let denominator = 0;
  for (const point of points) {
    numerator += (point.x - meanX) * (point.y - meanY);
    denominator += (point.x - meanX) ** 2;
  }
  return denominator === 0 ? 0 : (numerator / denominator) * 60;
}

function printReport(report: {
  options: SoakOptions;
  warmupSeconds: number;
  samples: TimedSample[];
  tally: SoakTally;
  idleBefore: ServerSample;
  idleAfter: ServerSample;
}): void {
  const { samples, tally, idleBefore, idleAfter } = report;
  const out: string[] = [""];
  const minutes = report.options.minutes;
  out.push(
    `Soak: ${report.options.clients} clients for ${minutes} min against the tiny model (parallel ${PARALLEL}), server in a child process, Node ${process.version}`,
  );
  const requests = totalRequests(tally);
  out.push(
    `${requests} requests (${Object.entries(tally.requests)
      .map(([kind, count]) => `${kind} ${count}`)
      .join(", ")}), ${tally.aborted} cut by the client, ${tally.completionTokens} completion tokens`,
  );
  const failures = [...tally.failures].map(([key, count]) => `${key}: ${count}`);
  out.push(
    failures.length === 0 ? "unexpected responses: none" : `unexpected responses: ${failures.join("; ")}`,
  );
  out.push("");

  // About a dozen rows, evenly spread, always with the last.
  const step = Math.max(1, Math.round(samples.length / 12));
  const shown = samples.filter((_, index) => index % step === 0 || index === samples.length - 1);
  out.push(
    formatTable(
      ["time", "RSS", "heap used/committed", "loop delay p50/p99/max ms", "handles", "sequences"],
      shown.map(({ seconds, sample }) => [
        `${seconds.toFixed(0)} s${seconds <= report.warmupSeconds ? " (warm-up)" : ""}`,
        `${formatMegabytes(sample.rss)}${sample.collected ? " (after GC)" : ""}`,
        `${formatMegabytes(sample.heapUsed)} / ${formatMegabytes(sample.heapTotal)}`,
        `${formatNumber(sample.eventLoopDelay.p50)}/${formatNumber(sample.eventLoopDelay.p99)}/${formatNumber(sample.eventLoopDelay.max)}`,
        String(countHandles(sample)),
        describeSequences(sample),
      ]),
    ),
  );
  out.push("");

  out.push(...describeRss(samples, report.warmupSeconds));
  const p99 = samples.map(({ sample }) => sample.eventLoopDelay.p99);
  const worst = [...samples]
    .sort((a, b) => b.sample.eventLoopDelay.max - a.sample.eventLoopDelay.max)
    .slice(0, 3)
    .map(
      ({ seconds, sample }) =>
        `${formatNumber(sample.eventLoopDelay.max)} ms (sample at ${seconds.toFixed(0)} s)`,
    );
  out.push(
    `event-loop delay under load: p99 per sample ${formatNumber(Math.min(...p99))} to ${formatNumber(Math.max(...p99))} ms; longest single delays ${worst.join(", ")}`,
  );
  const handlesBefore = countHandles(idleBefore);
  const handlesAfter = countHandles(idleAfter);
  out.push(
    `handles idle before: ${handlesBefore} (${describeHandles(idleBefore)}); idle after: ${handlesAfter} (${describeHandles(idleAfter)}): ${handlesAfter > handlesBefore ? "GREW" : "no growth"}`,
  );
  const leakedSequences = idleAfter.engines.some(
    (engine) => engine.leased !== 0 || engine.waiting !== 0 || engine.free !== engine.sequences,
  );
  out.push(
    `sequences idle before: ${describeSequences(idleBefore)}; idle after: ${describeSequences(idleAfter)}: ${leakedSequences ? "LEAKED" : "all returned"}`,
  );
  out.push(
    `RSS idle (after a full collection) before: ${formatMegabytes(idleBefore.rss)}, after: ${formatMegabytes(idleAfter.rss)}`,
  );
  process.stdout.write(`${out.join("\n")}\n`);
}
