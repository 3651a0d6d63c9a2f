import type { Agent } from "node:http";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { type ChatOutcome, postChatCompletion } from "./chat-client.ts";
import type { BenchSampling } from "./direct-runner.ts";
import type { ServerChild } from "./server-child.ts";
import { readThreadCpuMicroseconds } from "./statistics.ts";

/** Model ids of the benchmark server. */
export const SMALL_MODEL = "bench-small";
export const TINY_MODEL = "bench-tiny";
/** Per-sequence context on both sides: the prompt plus any `--tokens` up to about 1,900. */
export const CONTEXT_LENGTH = 2048;
export const BATCH_SIZE = 512;
/** Tollgate's `parallel` for both models (the catalogue default). */
export const PARALLEL = 4;
/**
 * Sampling on both sides; client (or sequence) i uses `seed + i`. Greedy, so both sides do the
 * same work per token (a model written with `endBias: 0` never ends by itself either way).
 */
export const sampling: BenchSampling = { temperature: 0, topP: 1, seed: 1234 };
/** The conversation every request sends, and the direct side renders with the same template. */
export const messages = [
  { role: "system" as const, content: "You are a helpful assistant." },
  { role: "user" as const, content: "Write a long story about a lighthouse keeper and a cat." },
];

/** Options of one `npm run bench -- local` run. */
export interface LocalBenchOptions {
  /** Completion tokens per request. */
  tokens: number;
  rounds: number;
  /** `undefined`: Tollgate's default (physical cores minus one, at least one). */
  threads: number | undefined;
  ttftSamples: number;
}

/** Where the benchmark's clients send requests. */
export interface BenchClient {
  baseUrl: string;
  key: string;
  agent: Agent;
}

/** One timed run. */
export interface RunResult {
  tokens: number;
  milliseconds: number;
  /** Main-thread CPU time during the run, in milliseconds; `undefined` where Node cannot tell. */
  mainThreadMilliseconds: number | undefined;
  /** Event-loop delay during the run, in milliseconds. */
  delay: { p50: number; p99: number; max: number };
}

/**
 * Runs `work` (which returns the tokens it generated) and measures it: the main thread and event
 * loop of this process, or of `server` (a Tollgate server in its own process) when given.
 */
export async function timeRun(work: () => Promise<number>, server?: ServerChild): Promise<RunResult> {
  if (server !== undefined) {
    // Sampling resets the child's event-loop histogram: the second sample covers the run.
    const before = await server.sample();
    const started = performance.now();
    const tokens = await work();
    const milliseconds = performance.now() - started;
    const after = await server.sample();
    const cpuBefore = before.mainThreadCpuMicroseconds;
    const cpuAfter = after.mainThreadCpuMicroseconds;
    return {
      tokens,
      milliseconds,
      mainThreadMilliseconds:
        cpuBefore === undefined || cpuAfter === undefined ? undefined : (cpuAfter - cpuBefore) / 1000,
      delay: { p50: after.eventLoopDelay.p50, p99: after.eventLoopDelay.p99, max: after.eventLoopDelay.max },
    };
  }
  // A fresh monitor per run: a re-enabled one counts the pause as one long delay.
  const delay = monitorEventLoopDelay({ resolution: 1 });
  const cpuBefore = readThreadCpuMicroseconds();
  delay.enable();
  const started = performance.now();
  const tokens = await work();
  const milliseconds = performance.now() - started;
  delay.disable();
  const cpuAfter = readThreadCpuMicroseconds();
  return {
    tokens,
    milliseconds,
    mainThreadMilliseconds:
      cpuBefore === undefined || cpuAfter === undefined ? undefined : (cpuAfter - cpuBefore) / 1000,
    delay: { p50: delay.percentile(50) / 1e6, p99: delay.percentile(99) / 1e6, max: delay.max / 1e6 },
  };
}

/** Tokens per second of a run. */
export function tokensPerSecond(run: RunResult): number {
  return (run.tokens / run.milliseconds) * 1000;
}

/**
 * Runs `clients` clients at once against the small model, each making one request of `tokens`
 * tokens; returns the completion tokens (and throws on any failed request).
 */
export async function runClients(options: {
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
