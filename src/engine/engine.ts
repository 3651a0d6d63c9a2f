/**
 * The one contract between the HTTP edge and every engine (local llama.cpp, upstream
 * OpenAI-compatible servers). An engine turns a {@link ChatRequest} into a typed stream of
 * {@link StreamPart}s; the edge renders that stream as one completion or as Server-Sent Events.
 * Nothing outside an engine knows which engine runs a model.
 */
import type { AppError } from "../errors/app-error.ts";
import type { EngineLogger } from "./create-engine.ts";
import type { UpstreamActivity } from "./upstream-activity.ts";

export type { FallbackOutcome, UpstreamActivity, UpstreamAttemptOutcome } from "./upstream-activity.ts";

/** A JSON Schema object as the client sent it (validated only for being an object). */
export type JsonSchema = Record<string, unknown>;

/** One call of a function-calling tool, as the model produced it or as the client sends it back. */
export interface ToolCall {
  /** Identifier the client echoes in the `tool` message that answers the call. */
  id: string;
  name: string;
  /** The arguments as a JSON text (an object), exactly as generated. */
  arguments: string;
}

/**
 * A conversation message, already normalised: `developer` became `system`, and content sent as
 * text parts is their texts joined by line breaks (as vLLM and llama.cpp's server join them),
 * with the parts kept in `contentParts` for upstream models, which get them as sent.
 */
export type ChatMessage = (
  | { role: "system"; content: string; name?: string }
  | { role: "user"; content: string; name?: string }
  | { role: "assistant"; content: string | null; toolCalls?: ToolCall[]; name?: string }
  | { role: "tool"; content: string; toolCallId: string }
) & { contentParts?: readonly string[] };

/** A function the model may call. */
export interface ToolDefinition {
  name: string;
  description?: string;
  /** JSON Schema of the arguments object; `undefined` means "no parameters". */
  parameters?: JsonSchema;
  strict?: boolean;
}

/** Which tool calls are allowed: none, the model's choice, at least one, or one named function. */
export type ToolChoice =
  | { type: "none" }
  | { type: "auto" }
  | { type: "required" }
  | { type: "function"; name: string };

/** The shape the assistant's text must have. */
export type ResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; name: string; description?: string; schema: JsonSchema; strict?: boolean };

/** A validated chat request, in engine terms (camelCase, defaults applied). */
export interface ChatRequest {
  messages: ChatMessage[];
  /** Upper bound of generated tokens; `undefined` means "until the natural end or the context". */
  maxTokens: number | undefined;
  /**
   * 0 to 2; 0 is greedy. `undefined` when the client sent none: the engine's default (1 locally;
   * an upstream's own, as some models take no sampling settings at all).
   */
  temperature: number | undefined;
  /** 0 to 1; `undefined` when the client sent none, as {@link ChatRequest.temperature}. */
  topP: number | undefined;
  /** -2 to 2. */
  frequencyPenalty: number;
  /** -2 to 2. */
  presencePenalty: number;
  /** Up to 4 stop strings; generation ends before any of them, which is not returned. */
  stop: string[];
  /** `undefined` means a random seed. */
  seed: number | undefined;
  tools: ToolDefinition[];
  toolChoice: ToolChoice;
  /**
   * The client's `parallel_tool_calls` (`undefined` when it sent none): passed on to upstream
   * models; on a local model `false` ends the generation after its first call.
   */
  parallelToolCalls?: boolean | undefined;
  /**
   * The client's `reasoning_effort` (`undefined` when it sent none): passed on to upstream models
   * as sent; the local engine does not apply it.
   */
  reasoningEffort?: string | undefined;
  responseFormat: ResponseFormat;
  /**
   * The client's `user`, its end-user's identifier (`undefined` when it sent none): passed on to
   * upstream models as sent (hosted APIs use it to trace abuse); the local engine has no use for it.
   */
  user?: string | undefined;
  /**
   * Log probabilities asked for (the client's `logprobs: true`; `undefined` when it did not ask,
   * or sent `false`): `top` is its `top_logprobs` (0 to 20; `undefined` when it sent none). Passed on
   * to upstream models; local models cannot give them, and the request is refused before it
   * reaches them ({@link ChatEngine.supportsLogprobs}).
   */
  logprobs?: { top: number | undefined } | undefined;
  /**
   * OpenAI's fields that only an upstream server acts on (`logit_bias`, `service_tier`,
   * `prompt_cache_key`, `metadata`, ...: upstream-extra-fields.ts), by their wire names, as the
   * client sent them; `undefined` when it sent none. One bag, so that another is one line of the
   * schema; the upstream engine passes them on as they are, a local one refuses what it cannot
   * apply ({@link ChatEngine.refuseUpstreamExtras}) and ignores the rest.
   */
  upstreamExtras?: UpstreamExtras | undefined;
}

/** See {@link ChatRequest.upstreamExtras}: wire names to values, checked for shape only. */
export type UpstreamExtras = Readonly<Record<string, unknown>>;

/**
 * One token's log probability and its most likely alternatives, in the wire's own shape and
 * names (OpenAI's `logprobs.content[]`): an upstream's, checked and rebuilt with these fields
 * only (read-logprobs.ts), and serialised as they are.
 */
export interface TokenLogprob {
  token: string;
  logprob: number;
  /** The token's UTF-8 bytes; null where the upstream has none to give. */
  bytes: number[] | null;
  top_logprobs: { token: string; logprob: number; bytes: number[] | null }[];
}

/**
 * The log probabilities of the tokens a part carries (OpenAI's `choices[].logprobs`): those of
 * the content and those of a refusal, each null where there are none.
 */
export interface Logprobs {
  content: TokenLogprob[] | null;
  refusal: TokenLogprob[] | null;
}

/**
 * Why generation ended. `stop`, `length`, `tool_calls` and `content_filter` are the wire values;
 * `error` ends a stream that failed after it started; `other` is anything an upstream reports
 * that has no unified meaning (the raw value is kept beside it).
 */
export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "error" | "other";

/** Token counts. A count that is unknown stays `undefined`, never 0. */
export interface Usage {
  promptTokens: number | undefined;
  completionTokens: number | undefined;
  /** True when the counts were computed by Tollgate rather than reported by the engine. */
  estimated?: boolean;
  /**
   * What an upstream told of its counts (`prompt_tokens_details`, `completion_tokens_details`:
   * cached prompt tokens, reasoning tokens, ...), passed on to the client where the counts are
   * the upstream's own; never charged differently.
   */
  details?: UsageDetails;
}

/** The breakdowns of a usage report, as OpenAI names them; each count a whole number. */
export interface UsageDetails {
  prompt?: Partial<Record<PromptTokensDetail, number>>;
  completion?: Partial<Record<CompletionTokensDetail, number>>;
}

/** The counts of OpenAI's `prompt_tokens_details`. */
export const PROMPT_TOKENS_DETAILS = ["cached_tokens", "audio_tokens"] as const;
export type PromptTokensDetail = (typeof PROMPT_TOKENS_DETAILS)[number];

/** The counts of OpenAI's `completion_tokens_details`. */
export const COMPLETION_TOKENS_DETAILS = [
  "reasoning_tokens",
  "audio_tokens",
  "accepted_prediction_tokens",
  "rejected_prediction_tokens",
] as const;
export type CompletionTokensDetail = (typeof COMPLETION_TOKENS_DETAILS)[number];

/**
 * One part of an engine's output stream. The last (`finish` or `error`) may say how long the
 * request waited in the engine's own queue before it ran (`queueMs`; engines without one leave
 * it out). A part of output may carry the log probabilities of its tokens (`logprobs`, only when
 * the request asked for them and the engine gave them): the client gets them with that part.
 * A `text-delta` whose text is "" carries some (tokens that showed no text of their own, their
 * logprobs left over at the answer's end).
 */
export type StreamPart =
  | { type: "text-delta"; text: string; logprobs?: Logprobs }
  /** A fragment of a refusal: the model declined to answer (an upstream's `refusal`). */
  | { type: "refusal-delta"; text: string; logprobs?: Logprobs }
  | {
      type: "tool-call-delta";
      logprobs?: Logprobs;
      /** Position of the call among this response's calls, from 0. */
      index: number;
      /** Present on the first delta of each index only. */
      id?: string;
      /** Present on the first delta of each index only. */
      name?: string;
      /** A fragment of the arguments JSON text; "" on a first delta that carries none. */
      argumentsDelta: string;
    }
  | {
      type: "finish";
      reason: FinishReason;
      rawReason: string | undefined;
      usage: Usage;
      queueMs?: number;
      /**
       * The run ended before the engine began on it (its client left while it waited for its
       * turn): it took nothing of the model, and uses none of its key's token rate.
       */
      unstarted?: true;
    }
  | { type: "error"; error: AppError; usage: Usage; queueMs?: number };

/** The part that ends a run that finished (stopped, at its length, or cut). */
export type FinishPart = Extract<StreamPart, { type: "finish" }>;

/**
 * Parts that became available together (one read of an upstream's answer, the tokens generated
 * while the reader was busy), never empty. Passing them on as one step instead of one by one
 * spares each layer between the engine and the client a promise per part, and lets a stream
 * write them to its client at once.
 */
export type PartBatch = readonly StreamPart[];

/** Readiness of a model, as `/v1/models` reports it. */
export type ModelStatus = "available" | "loading" | "unavailable";

/**
 * What a fallback can use of a request, as its share of the reservation is priced: `refuses`
 * when its context cannot hold the request (it would refuse it: it adds nothing to the maximum
 * cost), else the most completion tokens it may generate (what its context leaves after the
 * prompt, within the run's bound), and its own prompt count where it makes one (a loaded local
 * model: its chat template's tokens included).
 */
export type AlternateBound =
  | { refuses: true }
  | { refuses: false; promptTokens?: number; completionTokens: number };

/**
 * A request that an engine has accepted and measured but not yet run. Preparing happens
 * before billing (the prompt size prices the reservation); running waits in the model's queue.
 */
export interface PreparedChat {
  /** Prompt tokens: exact for local models, an estimate where the engine cannot count. */
  promptTokens: number;
  /**
   * Whether {@link promptTokens} is Tollgate's estimate (an upstream's tokenizer is unknown): a
   * run that fails before the engine reports usage is recorded with it, marked estimated.
   */
  promptTokensEstimated?: boolean;
  /**
   * The most prompt tokens the request can count, where {@link promptTokens} is an estimate:
   * prices the reservation (a maximum cost, SPEC section 6). Absent: {@link promptTokens}.
   */
  promptTokensAtMost?: number;
  /** The most completion tokens this run can produce (`max_tokens`, else the rest of the context). */
  maxCompletionTokens: number;
  /**
   * Catalogue ids of the other models that may serve this request (an upstream model's
   * `fallbacks`): the reservation must cover the dearest of them.
   */
  alternateModelIds?: readonly string[];
  /**
   * What some of {@link alternateModelIds} can cost, by catalogue id, where they can tell (see
   * {@link AlternateBound}): the reservation prices each of them so, the others with
   * {@link promptTokensAtMost} and {@link maxCompletionTokens}.
   */
  alternateBounds?: ReadonlyMap<string, AlternateBound>;
  /**
   * The catalogue id of the model that serves the run, once its first part is out: one of
   * {@link alternateModelIds}, or `undefined` for the model the request named.
   */
  servedBy?(): string | undefined;
  /**
   * Runs the request: its parts, in batches (see {@link PartBatch}). Errors before the first
   * part (queue full, upstream down) are thrown from the first `next()` as an {@link AppError},
   * so the edge can still answer with a status; errors after the first part arrive as an `error`
   * part. Aborting `signal` stops generation at once; the stream then ends with a `finish` part
   * whose usage counts what was generated. The last part is always `finish` or `error`, and
   * nothing follows the batch that holds it; only a run that moved to another engine
   * ({@link RunOptions.onRetired}) ends without any part.
   */
  run(signal: AbortSignal, options?: RunOptions): AsyncIterable<PartBatch>;
}

/**
 * How a run waits for its turn: for whom, and what it may do when a reload replaces its engine
 * meanwhile (see {@link ChatEngine.retire}); engines without a queue ignore it.
 */
export interface RunOptions {
  /**
   * Called once when the engine is retired while the run waits for its turn, or when it starts
   * waiting on a retired engine: nothing is generated yet. The run keeps its place until
   * `leave()`, which takes it out of the queue and returns `true` if it still waits (its run then
   * ends without any part: it has moved), `false` once its turn has come. `queuedAt` is when it
   * began to wait (`performance.now()`), for {@link RunOptions.queuedAt} of the run that takes
   * over. The returned promise settles when the caller has decided: until then the run counts
   * as waiting on the engine it moves to, not on this one.
   */
  onRetired?: (leave: () => boolean, queuedAt: number) => Promise<void>;
  /**
   * The run moved from a retired engine's queue, where it waited since `queuedAt`
   * (`performance.now()`): it waits ahead of requests that came later, whatever `max_queue`, and
   * its queue time counts from then.
   */
  queuedAt?: number;
  /**
   * Who the run is for (the account it spends from): where runs wait for a model's sequences or an
   * endpoint's connections, tenants share the wait fairly (fair-queue.ts). Absent: runs without one
   * share a line of their own.
   */
  tenant?: string | undefined;
}

/** What the caller allows a prepared request beyond its own model. */
export interface PrepareOptions {
  /**
   * Whether another catalogue model (a fallback) may serve the request: the key's permission.
   * Default: any.
   */
  mayServe?: (modelId: string) => boolean;
  /**
   * Where the run's log lines go: the request's own logger, so that they carry its request id.
   * Default: the engine's.
   */
  logger?: EngineLogger;
  /** The request's: a client that leaves while the model still loads stops waiting for it. */
  signal?: AbortSignal;
  /**
   * The account the request spends from (as RunOptions.tenant): the places of requests waiting
   * for a model to load are shared between accounts as its queue's are.
   */
  tenant?: string | undefined;
}

/** An engine that serves one catalogue chat model. */
export interface ChatEngine {
  /** The context size that `context_length_exceeded` checks, if the engine knows it. */
  readonly contextLength: number | undefined;
  /**
   * Whether it serves now. `tenant` (an account, as RunOptions.tenant): as that tenant's requests
   * find it (an upstream endpoint may rest for one tenant's failures alone); without one, as a
   * model list shows it to anyone.
   */
  status(tenant?: string): ModelStatus;
  /**
   * Whether the engine's `unavailable` passes by itself (an upstream's endpoints resting, after
   * failures or for its `retry-after`), so that a reload keeps the engine while its settings are
   * unchanged: a new engine would forget the rests and call an upstream that asked to be left
   * alone. Absent: a reload gives an unavailable engine a new one (a local model whose file was
   * missing is loaded again).
   */
  readonly recoversByItself?: boolean;
  /**
   * Whether its `loading` is a load tried again after one failed (a local model's download
   * retried in the background), not its first: readiness waits for a model's first load only.
   */
  readonly retryingLoad?: boolean;
  /** Whether the engine can produce more than one choice per request (`n > 1`). */
  readonly supportsMultipleChoices: boolean;
  /**
   * Whether the engine can give the log probabilities of the tokens it generates (`logprobs`):
   * an upstream passes on what its server sends. Absent: it cannot (node-llama-cpp gives none
   * while it generates), and a request that asks is refused before anything runs.
   */
  readonly supportsLogprobs?: boolean;
  /**
   * The 400 for {@link ChatRequest.upstreamExtras} the engine cannot apply (a local model: token
   * biases keyed by another tokenizer's ids, predicted outputs, output other than text), else
   * `undefined`; asked, like {@link supportsLogprobs}, before anything runs. Absent: the engine
   * passes them all on (an upstream).
   */
  refuseUpstreamExtras?(extras: UpstreamExtras): AppError | undefined;
  /**
   * Counts the prompt and checks it against the context. Throws an {@link AppError}
   * (`context_length_exceeded`, `model_unavailable`) when the request cannot run.
   */
  prepare(request: ChatRequest, options?: PrepareOptions): Promise<PreparedChat>;
  /**
   * The prompt tokens `request` counts on this model where it can tell at once (a local model
   * that is loaded: its chat template's tokens included), else `undefined`. A model that may fall
   * back to this one prices this one's share of the reservation with it.
   */
  measurePromptTokens?(request: ChatRequest): Promise<number | undefined>;
  /** Requests running in the engine and waiting for it now, for `/metrics`; optional. */
  load?(): { running: number; waiting: number };
  /**
   * The upstream endpoints that serve the model, for `/metrics`: how many there are and how
   * many are resting now (a cooldown after failures, or an upstream's `retry-after`). Absent for
   * an engine without endpoints (a local model).
   */
  endpoints?(): { total: number; resting: number };
  /**
   * What the engine did on the model's upstream servers since the server started, for `/metrics`:
   * cumulative counts that never go down, a reload that gives the model a new engine included.
   * Absent for an engine without endpoints (a local model).
   */
  upstreamActivity?(): UpstreamActivity;
  /**
   * Whether what the engine serves changed since it took it, outside the configuration: a local
   * model's file was replaced (moved into place, written over). A reload then gives the model a
   * new engine, as for a changed configuration (ModelRegistry.replace). Synchronous and cheap
   * (one `stat`). Optional: an engine without it (an upstream) is kept while its configuration is.
   */
  sourceChanged?(): boolean;
  /**
   * A reload replaced the engine: runs that wait for their turn are offered to move to the
   * model's new engine ({@link RunOptions.onRetired}); those running finish here. Optional: an
   * engine without a queue of its own has nothing to offer.
   */
  retire?(): void;
  /** Releases every resource (contexts, sockets). Requests in flight are aborted. */
  close(): Promise<void>;
}

/**
 * What an engine may ask of the catalogue: other models' engines (upstream fallbacks), looked up
 * when needed. One object for the catalogue's life, across reloads (ModelRegistry's): what is kept
 * under it (an upstream model's counts) outlives the engines a reload replaces.
 */
export interface EngineContext {
  resolveEngine(id: string): ChatEngine | undefined;
  /**
   * Keeps `engine` open until the returned function is called, though a reload replaces or
   * removes its model (ModelRegistry.hold): a request holds the fallbacks it was admitted with.
   */
  holdEngine?(engine: ChatEngine): () => void;
}
