import type { Target } from "./gateway-targets.ts";
import { type LoadGenerator, type LoadResult, runLoad } from "./load-generator.ts";
import { probeStreams, type StreamTimings } from "./probe-streams.ts";
import { readCpuMicroseconds, readPeakRssBytes } from "./process-stats.ts";

/** Non-streamed figures of one target in one round. */
export interface PlainRound {
  at16: LoadResult;
  at50: LoadResult;
  /** One connection: latency without queueing. */
  single: LoadResult;
  /** Gateway CPU per request at 50 connections, in microseconds. */
  cpuPerRequestUs: number | undefined;
}

/** Streamed figures of one target in one round. */
export interface StreamRound {
  /** One stream at a time, 20 chunks. */
  timings: StreamTimings;
  /** Paced streams (20 chunks, 5 ms apart) at 32 connections. */
  paced: LoadResult;
  /** Gateway CPU per fast stream of 20 and of 200 chunks (16 connections), in microseconds. */
  cpuPerStream20Us: number | undefined;
  cpuPerStream200Us: number | undefined;
  errors: number;
}

/** Everything measured on one target: the best of its rounds (the machine may be shared). */
export interface TargetResults {
  name: string;
  plain: PlainRound;
  stream: StreamRound;
  peakRssBytes: number | undefined;
  /** Failed requests over all the runs (connection errors and non-2xx answers). */
  errors: number;
}

export interface MeasureOptions {
  generator: LoadGenerator;
  /** Seconds of each throughput run. */
  durationSeconds: number;
  /** The load generator's core. */
  loadCpus: string | undefined;
}

function body(model: string, stream: boolean, chunks: number): string {
  return JSON.stringify({
    model,
    messages: [{ role: "user", content: "Say five words." }],
    max_tokens: chunks,
    ...(stream ? { stream: true } : {}),
  });
}

function loader(target: Target, options: MeasureOptions) {
  return (connections: number, seconds: number, requestBody: string) =>
    runLoad(options.generator, {
      url: target.url,
      connections,
      durationSeconds: seconds,
      body: requestBody,
      headers: target.headers,
      cpus: options.loadCpus,
    });
}

function cpuPer(target: Target, before: number | undefined, requests: number): number | undefined {
  if (target.pid === undefined || before === undefined || requests === 0) return undefined;
  const after = readCpuMicroseconds(target.pid);
  return after === undefined ? undefined : (after - before) / requests;
}

function cpuNow(target: Target): number | undefined {
  return target.pid === undefined ? undefined : readCpuMicroseconds(target.pid);
}

/** Lets the JIT warm up on both request kinds before anything is measured. */
export async function warmUp(target: Target, options: MeasureOptions): Promise<void> {
  const load = loader(target, options);
  await load(16, 2, body(target.model("fast"), false, 5));
  await load(16, 1, body(target.model("fast"), true, 20));
}

export async function measurePlain(target: Target, options: MeasureOptions): Promise<PlainRound> {
  const load = loader(target, options);
  const plain = body(target.model("fast"), false, 5);
  const at16 = await load(16, options.durationSeconds, plain);
  const before = cpuNow(target);
  const at50 = await load(50, options.durationSeconds, plain);
  const cpuPerRequestUs = cpuPer(target, before, at50.requests);
  const single = await load(1, 2, plain);
  return { at16, at50, single, cpuPerRequestUs };
}

export async function measureStreams(target: Target, options: MeasureOptions): Promise<StreamRound> {
  const load = loader(target, options);
  const timings = await probeStreams({
    url: target.url,
    body: body(target.model("fast"), true, 20),
    headers: target.headers,
    count: 200,
    warmUp: 20,
  });
  const paced = await load(32, options.durationSeconds, body(target.model("paced"), true, 20));
  const before20 = cpuNow(target);
  const stream20 = await load(16, 2, body(target.model("fast"), true, 20));
  const cpuPerStream20Us = cpuPer(target, before20, stream20.requests);
  const before200 = cpuNow(target);
  const stream200 = await load(16, 2, body(target.model("fast"), true, 200));
  const cpuPerStream200Us = cpuPer(target, before200, stream200.requests);
  return {
    timings,
    paced,
    cpuPerStream20Us,
    cpuPerStream200Us,
    errors: timings.errors + paced.errors + stream20.errors + stream200.errors,
  };
}

const best = (values: (number | undefined)[], pick: (a: number, b: number) => number) =>
  values.reduce<number | undefined>(
    (chosen, value) => (value === undefined ? chosen : chosen === undefined ? value : pick(chosen, value)),
    undefined,
  );

/** The best of each figure over the rounds: highest throughput, lowest latency and CPU. */
export function combineRounds(
  target: Target,
  plainRounds: readonly PlainRound[],
  streamRounds: readonly StreamRound[],
): TargetResults {
  const bestLoad = (runs: LoadResult[]): LoadResult => ({
    requests: Math.max(...runs.map((run) => run.requests)),
    requestsPerSecond: Math.max(...runs.map((run) => run.requestsPerSecond)),
    errors: runs.reduce((sum, run) => sum + run.errors, 0),
    p50Ms: Math.min(...runs.map((run) => run.p50Ms)),
    p99Ms: Math.min(...runs.map((run) => run.p99Ms)),
  });
  const plain: PlainRound = {
    at16: bestLoad(plainRounds.map((round) => round.at16)),
    at50: bestLoad(plainRounds.map((round) => round.at50)),
    single: bestLoad(plainRounds.map((round) => round.single)),
    cpuPerRequestUs: best(
      plainRounds.map((round) => round.cpuPerRequestUs),
      Math.min,
    ),
  };
  const stream: StreamRound = {
    timings: {
      firstChunkMs: Math.min(...streamRounds.map((round) => round.timings.firstChunkMs)),
      totalMs: Math.min(...streamRounds.map((round) => round.timings.totalMs)),
      errors: streamRounds.reduce((sum, round) => sum + round.timings.errors, 0),
    },
    paced: bestLoad(streamRounds.map((round) => round.paced)),
    cpuPerStream20Us: best(
      streamRounds.map((round) => round.cpuPerStream20Us),
      Math.min,
    ),
    cpuPerStream200Us: best(
      streamRounds.map((round) => round.cpuPerStream200Us),
      Math.min,
    ),
    errors: streamRounds.reduce((sum, round) => sum + round.errors, 0),
  };
  return {
    name: target.name,
    plain,
    stream,
    peakRssBytes: target.pid === undefined ? undefined : readPeakRssBytes(target.pid),
    errors: plain.at16.errors + plain.at50.errors + plain.single.errors + stream.errors,
  };
}
