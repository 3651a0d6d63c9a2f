import type { DirectRunner } from "./direct-runner.ts";
import {
  type BenchClient,
  type LocalBenchOptions,
  type RunResult,
  runClients,
  sampling,
  timeRun,
  tokensPerSecond,
} from "./local-bench-setup.ts";
import type { ServerChild } from "./server-child.ts";
import { median } from "./statistics.ts";

/** One Tollgate case, measured in pairs with the direct run it is compared to. */
export interface PairedCase {
  label: string;
  baselineLabel: string;
  /** The ratio to reach (SPEC §10), if this case has one. */
  target: number | undefined;
  /** Completion tokens every run should generate (requests × `max_tokens`), and every direct run. */
  expectedTokens: number;
  baselineExpectedTokens: number;
  runs: RunResult[];
  /** The direct run of each pair, in the same order as `runs`. */
  baselineRuns: RunResult[];
}

/** Runs (of the case or its direct pairs) that generated fewer tokens than asked for. */
export function countShortRuns(paired: PairedCase): number {
  return (
    paired.runs.filter((run) => run.tokens !== paired.expectedTokens).length +
    paired.baselineRuns.filter((run) => run.tokens !== paired.baselineExpectedTokens).length
  );
}

/** Each pair's ratio: the case's tokens/s divided by its paired direct run's. */
export function pairRatios(paired: PairedCase): number[] {
  return paired.runs.map((run, index) => {
    const baseline = paired.baselineRuns[index];
    return baseline === undefined ? Number.NaN : tokensPerSecond(run) / tokensPerSecond(baseline);
  });
}

/** The median of {@link pairRatios}: the case's ratio to node-llama-cpp. */
export function pairedRatio(paired: PairedCase): number {
  return median(pairRatios(paired));
}

interface CaseDefinition {
  label: string;
  baselineLabel: string;
  target: number | undefined;
  expectedTokens: number;
  baselineExpectedTokens: number;
  /** Pairs per round: the single-stream cases are cheap and have the tightest target. */
  pairsPerRound: number;
  baseline: () => Promise<number>;
  work: () => Promise<number>;
}

/**
 * Throughput on the small model. Every Tollgate run is paired with a direct run right before or
 * right after it (alternating, so a trend in the machine's load cancels out), the rounds visit the
 * cases in a rotating order, and the single-stream cases get two pairs per round.
 */
export async function measureThroughput(options: {
  options: LocalBenchOptions;
  client: BenchClient;
  /** The Tollgate server's process, measured during Tollgate's runs. */
  server: ServerChild;
  directSingle: DirectRunner;
  directBatch: DirectRunner;
  say: (text: string) => void;
}): Promise<PairedCase[]> {
  const { tokens, rounds } = options.options;
  const { client } = options;
  const single = async () => (await options.directSingle.generate({ tokens, sampling })).tokens;
  const batch = async () => (await options.directBatch.generate({ tokens, sampling })).tokens;
  const singleLabel = "direct node-llama-cpp, 1 sequence";
  const batchLabel = "direct node-llama-cpp, 4 sequences at once";
  const definitions: CaseDefinition[] = [
    {
      label: "Tollgate, 1 client, non-streamed",
      baselineLabel: singleLabel,
      target: 0.95,
      expectedTokens: tokens,
      baselineExpectedTokens: tokens,
      pairsPerRound: 2,
      baseline: single,
      work: () => runClients({ client, clients: 1, tokens, stream: false }),
    },
    {
      label: "Tollgate, 1 client, streamed",
      baselineLabel: singleLabel,
      target: 0.95,
      expectedTokens: tokens,
      baselineExpectedTokens: tokens,
      pairsPerRound: 2,
      baseline: single,
      work: () => runClients({ client, clients: 1, tokens, stream: true }),
    },
    ...[2, 4, 8].map(
      (clients): CaseDefinition => ({
        label: `Tollgate, ${clients} clients at once, streamed`,
        baselineLabel: batchLabel,
        target: clients === 4 ? 0.9 : undefined,
        expectedTokens: clients * tokens,
        baselineExpectedTokens: 4 * tokens,
        pairsPerRound: 1,
        baseline: batch,
        work: () => runClients({ client, clients, tokens, stream: true }),
      }),
    ),
  ];
  const cases: PairedCase[] = definitions.map((definition) => ({
    label: definition.label,
    baselineLabel: definition.baselineLabel,
    target: definition.target,
    expectedTokens: definition.expectedTokens,
    baselineExpectedTokens: definition.baselineExpectedTokens,
    runs: [],
    baselineRuns: [],
  }));

  // Untimed: the first generations of a context pay one-time costs.
  await single();
  await batch();
  for (const definition of definitions) await definition.work();

  for (let round = 0; round < rounds; round++) {
    options.say(`throughput round ${round + 1} of ${rounds}`);
    for (let offset = 0; offset < definitions.length; offset++) {
      const index = (round + offset) % definitions.length;
      const definition = definitions[index];
      const paired = cases[index];
      if (definition === undefined || paired === undefined) continue;
      for (let pair = 0; pair < definition.pairsPerRound; pair++) {
        // Direct first, then Tollgate first, alternating: a drift in the machine's load cancels.
        if ((round + pair) % 2 === 0) {
          paired.baselineRuns.push(await timeRun(definition.baseline));
          paired.runs.push(await timeRun(definition.work, options.server));
        } else {
          paired.runs.push(await timeRun(definition.work, options.server));
          paired.baselineRuns.push(await timeRun(definition.baseline));
        }
      }
    }
  }
  return cases;
}
