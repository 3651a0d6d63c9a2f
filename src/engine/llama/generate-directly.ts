/**
 * The direct path: `text` and `json` plans generated with `sequence.evaluate`, node-llama-cpp's
 * lowest-level generation loop, instead of `LlamaChat.generateResponse`.
 *
 * Why: LlamaChat's per-token JavaScript (stop-trigger detectors with locks on a token stream
 * regulator, segment handling, function-call detection, option objects rebuilt per token) took
 * about 0.28 ms of main-thread CPU per token, against about 0.17 ms for node-llama-cpp driven
 * directly (bench/local/direct-runner.ts): single-stream throughput stayed at 0.92-0.93 of that
 * baseline (about 680 tokens/s on the small test model), where SPEC §10 asks for 0.95.
 *
 * What it does, the way LlamaChat does it, so that a request gets the same text on either path
 * (test/engine/llama/llama-engine-direct.test.ts compares them):
 * - it evaluates the prompt tokens the engine counted (render-prompt.ts), which are the
 *   tokens LlamaChat evaluates, and samples with the options LlamaChat passes (temperature, top-p,
 *   seed, top-k at node-llama-cpp's 40, the repeat penalty over the tokens released so far (and
 *   those held only for the request's stop strings, which LlamaChat never sees), the
 *   JSON grammar): the same tokens come out;
 * - it ends on an end-of-generation token, on the chat wrapper's and the grammar's stop triggers,
 *   on the request's stop strings (which may span tokens and are never emitted), at `maxTokens`,
 *   or when `signal` aborts (checked between the prompt's batches too, and a token sampled after
 *   the abort is neither shown nor counted), with LlamaChat's stop reasons;
 * - it releases text as LlamaChat does: tokens whose bytes do not yet form whole characters wait
 *   for the next; tokens whose text may still become a stop trigger wait until that is decided;
 *   with a grammar that trims its whitespace suffix (JSON), whitespace-only tokens wait for more
 *   text; the chat wrapper's ignored start texts (one leading space or tab for the test model's
 *   template) are removed from the first text released.
 *
 * Where it differs from LlamaChat on purpose: text held for a stop string that never completed is
 * released when generation ends at `maxTokens` or on abort (LlamaChat drops it, and with it text
 * the client is billed for; the LlamaChat path applies the request's stop strings itself for that
 * reason, create-stop-matcher.ts).
 *
 * What it does not support, left to LlamaChat ({@link prepareDirectPrompt} answers `undefined`):
 * functions and forced tool calls (other plans), chat wrappers with segments (thoughts), and
 * renders with prefix triggers, rerender triggers, multi-character ignored start texts, or stop
 * triggers that span several tokens or mix tokens and text (beyond a trigger that starts with an
 * end-of-generation token, which that token ends first). Context shifts are not needed: the engine
 * never lets a prompt plus `maxTokens` exceed the context (check-context-length.ts).
 */
import type {
  ChatWrapper,
  LlamaContextSequence,
  LlamaGrammar,
  LlamaGrammarEvaluationState,
  LlamaModel,
  LlamaText,
  SequenceEvaluateOptions,
  Token,
  Tokenizer,
} from "node-llama-cpp";
import { createTextRelease } from "./create-text-release.ts";
import { evaluatePromptHead } from "./evaluate-prompt-head.ts";
import type { LlamaStopReason } from "./map-finish.ts";
import type { SamplingOptions } from "./map-sampling-options.ts";
import type { RenderedPrompt } from "./render-prompt.ts";

/** A prompt ready for {@link generateDirectly}: its tokens and what ends its generation. */
export interface DirectPrompt {
  tokens: Token[];
  /** Tokens of the chat wrapper's stop triggers (`stopGenerationTrigger`). */
  stopTokens: ReadonlySet<Token>;
  /** Texts of the chat wrapper's and the grammar's stop triggers (`stopGenerationTrigger`). */
  stopTexts: readonly string[];
  /** The request's stop strings (`customStopTrigger`). */
  customStopTexts: readonly string[];
  /** Characters of which one is removed where the response starts (the wrapper's ignored start texts). */
  ignoredStartCharacters: ReadonlySet<string>;
  /** Whitespace-only text waits for more text, and is dropped at the end (the grammar's setting). */
  trimWhitespaceSuffix: boolean;
}

/** A stop trigger resolved as node-llama-cpp's StopGenerationDetector resolves it. */
type ResolvedTrigger = (string | Token)[];

/** Whether a chat wrapper's responses can take the direct path: it defines no segments (thoughts). */
export function supportsDirectGeneration(chatWrapper: ChatWrapper): boolean {
  const segments = chatWrapper.settings.segments;
  return segments?.thought == null && segments?.comment == null;
}

/**
 * Prepares a rendered prompt for the direct path, or answers `undefined` when its render needs
 * what only LlamaChat supports (see the module comment). `stops` are the request's stop strings
 * the plan applies; `grammar` the plan's grammar.
 */
export function prepareDirectPrompt(options: {
  prompt: RenderedPrompt;
  model: LlamaModel;
  grammar: LlamaGrammar | undefined;
  stops: readonly string[];
}): DirectPrompt | undefined {
  const { model, grammar } = options;
  const { state } = options.prompt;
  const tokenizer = model.tokenizer;
  if (
    state.functionCall?.initiallyEngaged === true ||
    (state.prefixTriggers?.length ?? 0) > 0 ||
    state.noPrefixTrigger !== undefined ||
    (state.rerender?.triggers.length ?? 0) > 0
  ) {
    return undefined;
  }

  const stopTokens = new Set<Token>();
  const stopTexts: string[] = [];
  const triggers = [
    ...state.stopGenerationTriggers.map((trigger) => resolveTrigger(trigger, tokenizer)),
    ...(grammar?.stopGenerationTriggers ?? []).map((trigger) => resolveTrigger(trigger, tokenizer)),
  ];
  for (const trigger of triggers) {
    const [first] = trigger;
    if (first === undefined) continue;
    // An end-of-generation token ends generation before the rest of such a trigger could follow.
    if (typeof first !== "string" && model.isEogToken(first)) continue;
    if (trigger.length > 1) return undefined;
    if (typeof first === "string") stopTexts.push(first);
    else stopTokens.add(first);
  }

  const ignoredStartCharacters = resolveIgnoredStartCharacters(
    (state.ignoreStartText ?? []).map((text) => resolveTrigger(text, tokenizer)),
  );
  if (ignoredStartCharacters === undefined) return undefined;

  return {
    tokens: options.prompt.tokens,
    stopTokens,
    stopTexts,
    customStopTexts: options.stops,
    ignoredStartCharacters,
    trimWhitespaceSuffix: grammar?.trimWhitespaceSuffix ?? false,
  };
}

/** The grammar's evaluation state for one generation (node-llama-cpp is loaded once a model is). */
export async function createGrammarEvaluationState(
  model: LlamaModel,
  grammar: LlamaGrammar,
): Promise<LlamaGrammarEvaluationState> {
  const { LlamaGrammarEvaluationState } = await import("node-llama-cpp");
  return new LlamaGrammarEvaluationState({ model, grammar });
}

/** How a direct generation ended. */
export interface DirectGenerationEnd {
  stopReason: LlamaStopReason;
  /**
   * Tokens sampled after `signal` aborted (0 or 1): the sequence's token meter counts them, but they
   * were neither shown nor generated for the client, so they are not charged.
   */
  discardedTokens: number;
}

/**
 * Generates on `sequence` (whose state the caller has cleared) until a stop, passing released text
 * to `onText`, and answers how it ended. Completion tokens are for the caller to read from the
 * sequence's token meter, as on the LlamaChat path, less the {@link DirectGenerationEnd} discarded.
 *
 * The prompt is evaluated a batch at a time with the abort checked in between
 * (evaluate-prompt-head.ts): a client that leaves while its prompt is evaluated frees the sequence
 * within one batch, and nothing is sampled for it.
 */
export async function generateDirectly(options: {
  sequence: LlamaContextSequence;
  prompt: DirectPrompt;
  grammarState: LlamaGrammarEvaluationState | undefined;
  sampling: SamplingOptions;
  /** Tokens sampled at most, the end-of-generation token included; 0 for no limit (as LlamaChat). */
  maxTokens: number;
  signal: AbortSignal;
  onText: (text: string) => void;
}): Promise<DirectGenerationEnd> {
  const { sequence, signal, maxTokens } = options;
  const rest = await evaluatePromptHead({ sequence, tokens: options.prompt.tokens, signal });
  if (rest === undefined) return { stopReason: "abort", discardedTokens: 0 };
  const stream = createTextRelease({ model: sequence.model, prompt: options.prompt, onText: options.onText });
  const evaluateOptions = mapEvaluateOptions(options, sequence.model, stream.punished);
  let generated = 0;
  for await (const token of sequence.evaluate(rest, evaluateOptions)) {
    // A token that arrives after the abort was sampled (and metered) for a client that has left:
    // it is neither shown nor counted.
    if (signal.aborted) {
      stream.finish();
      return { stopReason: "abort", discardedTokens: 1 };
    }
    generated += 1;
    const stopReason = stream.push(token);
    if (stopReason !== undefined) return { stopReason, discardedTokens: 0 };
    if (maxTokens > 0 && generated >= maxTokens) {
      stream.finish();
      return { stopReason: "maxTokens", discardedTokens: 0 };
    }
  }
  throw new Error("The token stream ended without a stop (the sequence's sampler was disposed)");
}

/** The evaluate options LlamaChat passes for the same request (its `createNewEvaluationIterator`). */
function mapEvaluateOptions(
  options: { sampling: SamplingOptions; grammarState: LlamaGrammarEvaluationState | undefined },
  model: LlamaModel,
  punished: (count: number) => Token[],
): SequenceEvaluateOptions {
  const { temperature, topP, seed, repeatPenalty } = options.sampling;
  const evaluateOptions: SequenceEvaluateOptions = { temperature, topP, seed, yieldEogToken: true };
  if (options.grammarState !== undefined) evaluateOptions.grammarEvaluationState = options.grammarState;
  if (repeatPenalty !== false) {
    const lastTokens = repeatPenalty.lastTokens ?? 64; // LlamaChat's default
    const newLine = repeatPenalty.penalizeNewLine === true ? undefined : model.tokens.nl;
    if (lastTokens > 0) {
      evaluateOptions.repeatPenalty = {
        // As LlamaChat punishes the tokens it has released (create-text-release.ts).
        punishTokens: () => {
          const tokens = punished(lastTokens);
          return newLine === undefined ? tokens : tokens.filter((token) => token !== newLine);
        },
        maxPunishTokens: lastTokens,
        ...(repeatPenalty.penalty === undefined ? {} : { penalty: repeatPenalty.penalty }),
        ...(repeatPenalty.frequencyPenalty === undefined
          ? {}
          : { frequencyPenalty: repeatPenalty.frequencyPenalty }),
        ...(repeatPenalty.presencePenalty === undefined
          ? {}
          : { presencePenalty: repeatPenalty.presencePenalty }),
      };
    }
  }
  return evaluateOptions;
}

/**
 * A stop trigger as node-llama-cpp's StopGenerationDetector resolves it: texts stay text, special
 * tokens become tokens, adjacent texts merge.
 */
function resolveTrigger(
  trigger: LlamaText | string | readonly (string | Token)[],
  tokenizer: Tokenizer,
): ResolvedTrigger {
  const values: (string | Token)[] =
    typeof trigger === "string"
      ? [trigger]
      : Array.isArray(trigger)
        ? [...trigger]
        : (trigger as LlamaText).values.flatMap((value) =>
            typeof value === "string"
              ? [value]
              : "tokenizeSpecialTokensOnly" in value
                ? value.tokenizeSpecialTokensOnly(tokenizer)
                : value.tokenize(tokenizer),
          );
  const resolved: ResolvedTrigger = [];
  for (const value of values) {
    const last = resolved.at(-1);
    if (typeof value === "string" && typeof last === "string") resolved[resolved.length - 1] = last + value;
    else if (value !== "") resolved.push(value);
  }
  return resolved;
}

/**
 * The characters LlamaChat's ignore-start detector removes, or `undefined` when its triggers are
 * longer. That detector is a trie in which the first trigger to end at a node wins (later, longer
 * triggers through it are not added), so for the usual whitespace lists (" ", "  ", "\t", ...)
 * only the single characters count, and only one of them is removed.
 */
function resolveIgnoredStartCharacters(triggers: readonly ResolvedTrigger[]): Set<string> | undefined {
  const endsHere = new Map<string, boolean>();
  for (const trigger of triggers) {
    const [text] = trigger;
    if (text === undefined) continue;
    if (typeof text !== "string" || trigger.length > 1) return undefined;
    const first = text.charAt(0);
    if (endsHere.get(first) === true) continue;
    endsHere.set(first, text.length === 1);
  }
  for (const single of endsHere.values()) if (!single) return undefined;
  return new Set(endsHere.keys());
}
