import type {
  ChatHistoryItem,
  LLamaChatGenerateResponseOptions,
  LlamaChatResponseChunk,
  LlamaGrammar,
  Token,
} from "node-llama-cpp";
import { AppError } from "../../errors/app-error.ts";
import type { ChatRequest, FinishPart, PartBatch, RunOptions, StreamPart, Usage } from "../engine.ts";
import { withQueueTime } from "../queue-time.ts";
import { countTokensAfterAbort } from "./count-tokens-after-abort.ts";
import type { LeasePool } from "./create-lease-pool.ts";
import { createPartChannel } from "./create-part-channel.ts";
import { createPartMapper, type LlamaChatResult } from "./create-part-mapper.ts";
import { createStopMatcher } from "./create-stop-matcher.ts";
import { evaluatePromptHead } from "./evaluate-prompt-head.ts";
import { createGrammarEvaluationState, type DirectPrompt, generateDirectly } from "./generate-directly.ts";
import { linkAbortSignals } from "./link-abort-signals.ts";
import type { LlamaEngineLogger } from "./llama-engine-logger.ts";
import type { GenerationSlot } from "./load-llama-model.ts";
import { type LlamaStopReason, mapStopReason } from "./map-finish.ts";
import { mapSamplingOptions, type SamplingOptions } from "./map-sampling-options.ts";
import { type GenerationPlan, planStopStrings } from "./plan-generation.ts";

/** Everything one prepared request needs to run. */
export interface LlamaGenerationOptions {
  pool: LeasePool<GenerationSlot>;
  request: ChatRequest;
  plan: GenerationPlan;
  history: ChatHistoryItem[];
  /** The grammar of grammar plans (`json`, `tool-arguments`, `tool-envelope`, `call-or-json`). */
  grammar: LlamaGrammar | undefined;
  /** The prompt for the direct path (generate-directly.ts); `undefined` generates with LlamaChat. */
  directPrompt: DirectPrompt | undefined;
  /** The rendered prompt's tokens (render-prompt.ts), which LlamaChat evaluates too. */
  prompt: Token[];
  promptTokens: number;
  maxCompletionTokens: number;
  /** The client's signal: aborting ends generation with a `finish` that counts what was generated. */
  signal: AbortSignal;
  /** The engine's: aborted when the model unloads; the stream then ends with an error part. */
  closeSignal: AbortSignal;
  /** The request's logger (see `PrepareOptions.logger`). */
  logger: LlamaEngineLogger;
  /** The catalogue id, for the log line of a failed generation. */
  modelId: string;
  /** What the caller does when a reload retires the engine while the run waits (engine.ts). */
  runOptions?: RunOptions | undefined;
}

/**
 * Runs one request on a leased sequence and streams its parts: on the direct path when the engine
 * prepared a direct prompt (generate-directly.ts), otherwise with the slot's LlamaChat.
 *
 * The sequence's state is cleared before every run, so each run starts from the same empty state
 * and evaluates its whole prompt in the same batches: llama.cpp's logits for a token can differ in
 * the last bits depending on how the tokens before it were batched, and reusing a previous
 * request's prefix would make "same request, same seed, same text" depend on what ran before.
 * Completion tokens are read from the sequence's token meter, which counts one output per sampled
 * token (the end-of-generation token included) and none for prompt evaluation, less the tokens
 * sampled after the client left: neither path can stop a sampling under way, and what comes out of
 * it after the abort is not generated for anyone. On either path the prompt is evaluated a batch at
 * a time, stopping between batches on an abort (evaluate-prompt-head.ts): a client that leaves
 * while its prompt is evaluated frees the sequence within a batch, and a run that sampled nothing
 * ends as one aborted in the queue does, with 0 completion tokens (which cost nothing).
 */
export async function* runLlamaGeneration(options: LlamaGenerationOptions): AsyncGenerator<PartBatch> {
  const { signal, closeSignal } = options;
  const wait = linkAbortSignals([signal, closeSignal]);
  const queuedAt = options.runOptions?.queuedAt ?? performance.now();
  /** Whether the run left the queue for the model's new engine (a reload replaced this one). */
  let moved = false;
  const onRetired = options.runOptions?.onRetired;
  const lease = await options.pool
    .acquire(wait.signal, {
      since: options.runOptions?.queuedAt,
      tenant: options.runOptions?.tenant,
      onRetired:
        onRetired &&
        ((leave) =>
          onRetired(() => {
            moved = leave();
            return moved;
          }, queuedAt)),
    })
    .catch((error: unknown) => {
      // Refused after it waited (its place went to another account's request): the wait is told.
      throw typeof error === "object" && error !== null
        ? withQueueTime(error, Math.round(performance.now() - queuedAt))
        : error;
    })
    .finally(wait.unlink);
  const queueMs = Math.round(performance.now() - queuedAt);
  if (lease === undefined) {
    // Taken over by the new engine's run: this one has nothing to say.
    if (moved) return;
    if (!signal.aborted) throw unloadedError();
    yield [{ ...abortFinish(options.promptTokens, 0, queueMs), unstarted: true }];
    return;
  }

  const { sequence, chat } = lease.item;
  const stopController = new AbortController();
  const generationAbort = linkAbortSignals([signal, closeSignal, stopController.signal]);
  const channel = createPartChannel<StreamPart>();
  const meterStart = sequence.tokenMeter.getState().usedOutputTokens;
  /** Tokens metered but sampled after the abort (see the function comment). */
  let discardedTokens = 0;
  const usage = (): Usage => ({
    promptTokens: options.promptTokens,
    completionTokens: Math.max(
      0,
      sequence.tokenMeter.getState().usedOutputTokens - meterStart - discardedTokens,
    ),
  });
  const parts = createPartMapper(options.plan, (part) => channel.push(part));

  const generateDirectlyOn = async (prompt: DirectPrompt, sampling: SamplingOptions): Promise<Ended> => {
    const grammarState =
      options.grammar === undefined
        ? undefined
        : await createGrammarEvaluationState(sequence.model, options.grammar);
    const end = await generateDirectly({
      sequence,
      prompt,
      grammarState,
      sampling,
      maxTokens: options.maxCompletionTokens,
      signal: generationAbort.signal,
      onText: parts.onText,
    });
    discardedTokens += end.discardedTokens;
    return { stopReason: end.stopReason };
  };

  const generateWithLlamaChat = async (sampling: SamplingOptions): Promise<Ended> => {
    // LlamaChat evaluates a prompt in one go: the head is evaluated here, where an abort stops it,
    // and LlamaChat evaluates the rest (it keeps the sequence's state where it matches its prompt).
    const rest = await evaluatePromptHead({
      sequence,
      tokens: options.prompt,
      signal: generationAbort.signal,
    });
    if (rest === undefined) return { stopReason: "abort" };
    // LlamaChat gets no stop strings: it would drop the text held for one (create-stop-matcher.ts).
    const stops = planStopStrings(options.plan, options.request);
    const matcher = stops.length === 0 ? undefined : createStopMatcher(stops, parts.onText);
    const stopHit = new AbortController();
    const chatAbort = linkAbortSignals([generationAbort.signal, stopHit.signal]);
    const common = {
      ...sampling,
      ...(matcher === undefined
        ? { onTextChunk: parts.onText }
        : {
            onResponseChunk: (chunk: LlamaChatResponseChunk) => {
              if (chunk.type === undefined && matcher.push(chunk.text)) stopHit.abort();
            },
          }),
      maxTokens: options.maxCompletionTokens,
      signal: chatAbort.signal,
      stopOnAbortSignal: true,
    } satisfies LLamaChatGenerateResponseOptions;
    let result: LlamaChatResult;
    const afterAbort = countTokensAfterAbort(sequence, generationAbort.signal);
    try {
      result =
        options.plan.kind === "functions"
          ? await chat.generateResponse(options.history, {
              ...common,
              functions: options.plan.functions,
              documentFunctionParams: true,
              // `parallel_tool_calls: false`: the generation ends after its first call.
              ...(options.request.parallelToolCalls === false ? { maxParallelFunctionCalls: 1 } : {}),
              onFunctionCallParamsChunk: (chunk) => {
                // No stop string can follow once a call starts: held text goes first, as LlamaChat does.
                matcher?.release();
                parts.onFunctionCallParams(chunk);
              },
            })
          : await chat.generateResponse(options.history, {
              ...common,
              ...(options.grammar === undefined ? {} : { grammar: options.grammar }),
            });
    } catch (error) {
      if (matcher?.stopped === true) return { stopReason: "customStopTrigger" };
      throw error;
    } finally {
      chatAbort.unlink();
      afterAbort.restore();
      discardedTokens += afterAbort.count;
    }
    // Ended by the stop string's abort: LlamaChat reports "abort".
    if (matcher?.stopped === true)
      return { stopReason: "customStopTrigger", functionCalls: result.functionCalls };
    // Ended otherwise (max tokens, abort, end of generation, calls): held text is the client's.
    matcher?.release();
    return { stopReason: result.metadata.stopReason, functionCalls: result.functionCalls };
  };

  const generate = async (): Promise<StreamPart> => {
    await sequence.clearHistory();
    const sampling = mapSamplingOptions(options.request);
    const ended =
      options.directPrompt === undefined
        ? await generateWithLlamaChat(sampling)
        : await generateDirectlyOn(options.directPrompt, sampling);
    if (closeSignal.aborted && !signal.aborted)
      return { type: "error", error: unloadedError(), usage: usage() };
    parts.onEnd(ended);
    return mapStopReason({
      plan: options.plan,
      stopReason: ended.stopReason,
      calledFunctions: (ended.functionCalls?.length ?? 0) > 0 || parts.calledFunctions,
      usage: usage(),
    });
  };

  // The sequence goes back to the pool as soon as generation ends, whether or not the reader has
  // taken every part yet: a slow reader must not hold a sequence that another request waits for.
  const generation = generate()
    .catch((error: unknown): StreamPart => {
      // Aborted before anything was generated, node-llama-cpp throws the signal's reason.
      if (signal.aborted || stopController.signal.aborted) {
        return abortFinish(options.promptTokens, usage().completionTokens ?? 0);
      }
      if (closeSignal.aborted) return { type: "error", error: unloadedError(), usage: usage() };
      options.logger.error({ err: error, model: options.modelId }, "llama generation failed");
      return {
        type: "error",
        error: new AppError("internal_error", "The model failed while generating. Please retry.", {
          cause: error,
        }),
        usage: usage(),
      };
    })
    .then((end) => {
      generationAbort.unlink();
      lease.release();
      channel.push(end.type === "finish" || end.type === "error" ? { ...end, queueMs } : end);
      channel.close();
    });

  try {
    for (let parts = await channel.next(); parts !== undefined; parts = await channel.next()) {
      yield parts;
    }
  } finally {
    // Reached too when the reader stops early: stop generating, and hand the sequence back.
    stopController.abort();
    await generation;
  }
}

/** How a generation ended, on either path. */
interface Ended extends Pick<LlamaChatResult, "functionCalls"> {
  stopReason: LlamaStopReason;
}

function abortFinish(promptTokens: number, completionTokens: number, queueMs?: number): FinishPart {
  return {
    type: "finish",
    reason: "stop",
    rawReason: "abort",
    usage: { promptTokens, completionTokens },
    ...(queueMs === undefined ? {} : { queueMs }),
  };
}

function unloadedError(): AppError {
  return new AppError(
    "model_unavailable",
    "The model was unloaded while the request was waiting or running (the server is shutting down or reloading). Please retry.",
    { retryAfterSeconds: 1 },
  );
}
