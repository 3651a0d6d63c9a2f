/**
 * `npm run bench -- local [--tokens N] [--rounds N] [--threads N] [--ttft-samples N]`
 *
 * The local engine against node-llama-cpp driven directly, in one run, on the same generated
 * model files and thread count (SPEC §10):
 * - throughput on the `small` test model: direct with one sequence against Tollgate non-streamed
 *   and streamed with one client (HTTP to a real server in a child process, server-child.ts, as a
 *   server runs beside its clients); direct with four
 *   sequences in one context generating at once against Tollgate with 2, 4 and 8 concurrent
 *   clients (aggregate tokens/s). Each Tollgate run is paired with a direct run next to it, and a
 *   ratio is the median over the pairs, so load from other processes hits both sides alike
 *   (measure-throughput.ts).
 * - time to first token on the `tiny` model (measure-time-to-first-token.ts).
 * - main-thread CPU per token and event-loop delay on both sides (Tollgate's: the server process's).
 * - memory of a server in a child process: idle with an empty catalogue, idle with only an
 *   unavailable local model, with the small model loaded, and after a burst (measure-memory.ts).
 * Both models are written with `endBias: 0`, so every request runs exactly `max_tokens` tokens.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { getSharedLlama } from "../../src/engine/llama/get-shared-llama.ts";
import { resolveThreadCount } from "../../src/engine/llama/resolve-thread-count.ts";
import { writeBenchModel } from "./bench-models.ts";
import { createClientAgent, postChatCompletion } from "./chat-client.ts";
import { createDirectRunner } from "./direct-runner.ts";
import { formatLocalReport } from "./format-local-report.ts";
import {
  BATCH_SIZE,
  CONTEXT_LENGTH,
  type LocalBenchOptions,
  messages,
  PARALLEL,
  SMALL_MODEL,
  TINY_MODEL,
} from "./local-bench-setup.ts";
import { measureMemory } from "./measure-memory.ts";
import { measureThroughput, type PairedCase } from "./measure-throughput.ts";
import { measureTimeToFirstToken, type TimeToFirstTokenReport } from "./measure-time-to-first-token.ts";
import { startServerChild } from "./server-child.ts";

export async function run(args: string[]): Promise<void> {
  const options = parseArguments(args);
  const startedAt = performance.now();
  const loadBefore = loadavg();
  const folder = mkdtempSync(join(tmpdir(), "tollgate-bench-local-"));
  const say = (text: string) =>
    process.stderr.write(`[local ${((performance.now() - startedAt) / 1000).toFixed(0)}s] ${text}\n`);
  try {
    say("writing the test models (small: throughput, tiny: time to first token)");
    const small = await writeBenchModel({ folder, size: "small", endBias: 0 });
    const tiny = await writeBenchModel({ folder, size: "tiny", endBias: 0 });
    const llama = await getSharedLlama({ gpu: false });
    const threads = resolveThreadCount({ configured: options.threads, llama });

    say(`starting Tollgate and the direct contexts (${threads} thread${threads === 1 ? "" : "s"})`);
    const entry = { parallel: PARALLEL, threads, contextLength: CONTEXT_LENGTH };
    // The server runs in a process of its own, as it would beside its clients: the clients'
    // share of the work (HTTP, parsing the answers and the SSE streams) stays off its thread.
    const server = await startServerChild({
      folder,
      models: [
        { ...entry, id: SMALL_MODEL, path: small.path },
        { ...entry, id: TINY_MODEL, path: tiny.path },
      ],
    });
    const agent = createClientAgent();
    let throughput: PairedCase[];
    let ttft: TimeToFirstTokenReport;
    let promptTokens: number;
    try {
      const client = { baseUrl: server.baseUrl, key: server.key, agent };
      const probe = await postChatCompletion({
        ...client,
        body: { model: SMALL_MODEL, messages, max_tokens: 1, temperature: 0 },
      });
      promptTokens = probe.promptTokens;
      const history = messages.map((message) => ({ type: message.role, text: message.content }));
      const direct = { llama, contextSize: CONTEXT_LENGTH, threads, batchSize: BATCH_SIZE, history };
      const directSingle = await createDirectRunner({ ...direct, modelPath: small.path, sequences: 1 });
      const directBatch = await createDirectRunner({ ...direct, modelPath: small.path, sequences: 4 });
      const directTiny = await createDirectRunner({ ...direct, modelPath: tiny.path, sequences: 1 });
      try {
        throughput = await measureThroughput({ options, client, server, directSingle, directBatch, say });
        ttft = await measureTimeToFirstToken({ options, client, directTiny, say });
      } finally {
        await directSingle.dispose();
        await directBatch.dispose();
        await directTiny.dispose();
      }
    } finally {
      agent.destroy();
      await server.stop();
    }

    const memory = await measureMemory({ folder, small, threads, tokens: options.tokens, say });
    process.stdout.write(
      formatLocalReport({
        options,
        threads,
        cpuMathCores: llama.cpuMathCores,
        small,
        tiny,
        promptTokens,
        throughput,
        ttft,
        memory,
        loadBefore,
        seconds: (performance.now() - startedAt) / 1000,
      }),
    );
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

function parseArguments(args: string[]): LocalBenchOptions {
  const options: LocalBenchOptions = { tokens: 96, rounds: 5, threads: undefined, ttftSamples: 40 };
  for (let index = 0; index < args.length; index += 2) {
    const name = args[index];
    const value = Number(args[index + 1]);
    if (!Number.isInteger(value) || value < 1) throw new Error(`${name} needs a whole number of at least 1`);
    switch (name) {
      case "--tokens":
        options.tokens = Math.min(value, CONTEXT_LENGTH - 128);
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
