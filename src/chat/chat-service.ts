import type { ChatCompletionOptions } from "../api/convert-chat-request.ts";
import type { CompletionIdentity } from "../api/render-chat-completion.ts";
import type { CatalogModel } from "../catalog/catalog.ts";
import { ContextLengthError } from "../engine/check-context-length.ts";
import type { EngineLogger } from "../engine/create-engine.ts";
import type { ChatEngine, PartBatch, PreparedChat, Usage } from "../engine/engine.ts";
import { generatedTokensOf } from "../engine/generated-tokens.ts";
import { queueTimeOf } from "../engine/queue-time.ts";
import { refuseLogprobs } from "../engine/refuse-logprobs.ts";
import { AppError, isAppError } from "../errors/app-error.ts";
import { shownValue } from "../errors/shown-value.ts";
import { createRandomText } from "../ids/random-text.ts";
import type { ModelRegistry, RegisteredModel } from "../models/model-registry.ts";
import type { Annotate, ChatAdmission, SetHeader } from "./chat-admission.ts";
import { followReloads } from "./follow-reloads.ts";
import { describeModelNotAllowed, isModelAllowedForKey, type RequestKey } from "./request-key.ts";
import { type EndPart, type SettledAs, settleOnEnd } from "./settle-on-end.ts";

/** A chat request accepted and started: its identity and its parts, the first already produced. */
export interface StartedChat {
  identity: CompletionIdentity;
  /** The engine's batches of parts; the last part is `finish` or `error`. */
  parts: AsyncIterable<PartBatch>;
  /**
   * Once the run is settled, whether it was settled as unanswered (a whole answer the client
   * gets an error instead of: nothing charged); `undefined` before. A whole answer whose
   * settlement charged it must go out even if a shutdown cut the request while the charge was
   * being recorded: it used to get the shutdown's 503, charged in full.
   */
  settledUnanswered(): boolean | undefined;
  /**
   * Once the run is settled, whether the ledger records it with an error code (its error, its
   * client's leaving, a cut); `undefined` before. A stream whose settlement recorded a finished
   * answer must end with its finish even if a cut (a shutdown, lost reservation leases) came
   * while the charge was being recorded: it used to get the cut's error event, whose "Retry it"
   * had a client pay twice.
   */
  settledCut(): boolean | undefined;
}

/** What {@link ChatService.start} is given for one request. */
export interface StartInput {
  requestId: string;
  key: RequestKey;
  options: ChatCompletionOptions;
  signal: AbortSignal;
  setHeader: SetHeader;
  annotate: Annotate;
  /** The request's logger: the engine's lines about the run carry its request id. */
  logger?: EngineLogger;
}

export interface ChatServiceOptions {
  registry: ModelRegistry;
  admission: ChatAdmission;
}

// Defined with the settlement that records it; the API and the tests import it from here.
export { CLIENT_CLOSED } from "./settle-on-end.ts";

/** `chatcmpl-` and 24 random base-36-ish characters, like OpenAI's ids. */
function createCompletionId(): string {
  return `chatcmpl-${createRandomText(18, "base64url")}`;
}

/**
 * Decides what happens to a chat request, in the order SPEC §11 sets: model (404), the key's
 * permission (403), the model's kind (400), the request rate (429), then the engine measures
 * it, admission checks the token rate (429) and reserves (403), and the run waits for the model
 * (503). A request too large for the context (400) is told so after the token rate: it gets 429
 * when the key has no room for its tokens either, and spends none of them.
 * Settlement wraps the run so it happens before the last part reaches the client.
 */
export class ChatService {
  readonly #registry: ModelRegistry;
  readonly #admission: ChatAdmission;

  constructor(options: ChatServiceOptions) {
    this.#registry = options.registry;
    this.#admission = options.admission;
  }

  async start(input: StartInput): Promise<StartedChat> {
    const { key, options } = input;
    const entry = this.#registry.get(options.model);
    if (entry === undefined) {
      throw new AppError(
        "model_not_found",
        `The model '${shownValue(options.model)}' does not exist. List the models with GET /v1/models.`,
        {
          param: "model",
        },
      );
    }
    if (!isModelAllowedForKey(key, entry.model.id)) {
      throw new AppError("model_not_allowed", describeModelNotAllowed(key, entry.model.id), {
        param: "model",
      });
    }
    const engine = entry.engine;
    if (entry.model.kind !== "chat" || engine === undefined) {
      throw new AppError(
        "model_not_supported",
        `The model '${entry.model.id}' is a${entry.model.kind === "image" ? "n image" : `n ${entry.model.kind}`} model and cannot be used with /v1/chat/completions.`,
        { param: "model" },
      );
    }
    if (options.choices > 1 && !engine.supportsMultipleChoices) {
      throw new AppError(
        "invalid_value",
        `The model '${entry.model.id}' produces one choice per request; set 'n' to 1.`,
        {
          param: "n",
        },
      );
    }
    // Like `n`, what the model cannot do: told before the rate limits, which it then takes none of.
    if (options.request.logprobs !== undefined && engine.supportsLogprobs !== true)
      throw refuseLogprobs(entry.model.id);
    const extras = options.request.upstreamExtras;
    if (extras !== undefined) {
      const refusal = engine.refuseUpstreamExtras?.(extras);
      if (refusal !== undefined) throw refusal;
    }
    // The request holds its engine (or the one it moves to while it waits for its turn,
    // follow-reloads.ts): a reload closes a replaced engine only once none holds it.
    const release = this.#registry.hold(engine);
    try {
      return await this.#startOn(entry, engine, input, release);
    } catch (error) {
      release();
      throw error;
    }
  }

  async #startOn(
    entry: RegisteredModel,
    engine: ChatEngine,
    input: StartInput,
    release: () => void,
  ): Promise<StartedChat> {
    const { key, options, signal } = input;
    // The completion's `created` is when the request came in, as OpenAI's is: not when its answer
    // began, after the queue, a model still loading or a slow upstream.
    const created = Math.floor(Date.now() / 1000);
    const context = {
      requestId: input.requestId,
      key,
      model: entry.model,
      user: options.user,
      setHeader: input.setHeader,
      annotate: input.annotate,
    };
    await this.#admission.checkRequestRate(context);
    // A fallback serves the request only where the key may use it, as it would be asked for by name.
    let prepared: PreparedChat;
    // Engine time from here: preparing waits for a model still loading (seconds after a start or
    // a reload), which is the engine's time, not the gateway's overhead.
    // Durations on the monotonic clock: a wall clock stepped back (NTP, a resumed VM) made them
    // negative, which the ledger refuses, and the charge was never recorded.
    const preparing = performance.now();
    const prepareOptions = {
      mayServe: (modelId: string) => isModelAllowedForKey(key, modelId),
      signal,
      tenant: key.accountId,
      ...(input.logger === undefined ? {} : { logger: input.logger }),
    };
    try {
      prepared = await engine.prepare(options.request, prepareOptions);
    } catch (error) {
      // Too large for the context, and perhaps for the key's token rate too: the rate limit
      // answers first (SPEC section 11), the context length otherwise.
      if (error instanceof ContextLengthError)
        await this.#admission.checkTokenRate(context, error.requestedTokens);
      throw error;
    }
    // The alternates' entries that price the reservation also price the charge: a reload while
    // the primary fails may change or remove the fallback that then serves.
    const alternateModels =
      prepared.alternateModelIds === undefined ? undefined : this.#chatModels(prepared.alternateModelIds);
    const ticket = await this.#admission.admit({
      ...context,
      promptTokens: prepared.promptTokens,
      promptTokensAtMost: prepared.promptTokensAtMost,
      maxCompletionTokens: prepared.maxCompletionTokens,
      streamed: options.stream,
      ...(alternateModels === undefined ? {} : { alternateModels }),
      ...(prepared.alternateBounds === undefined ? {} : { alternateBounds: prepared.alternateBounds }),
    });
    const startedAt = performance.now();
    const prepareMs = startedAt - preparing;
    // A reload that replaces the engine while the run waits for its turn moves it to the new one.
    const run = followReloads({
      registry: this.#registry,
      modelId: entry.model.id,
      request: options.request,
      prepareOptions,
      engine,
      prepared,
      release,
      tenant: key.accountId,
    });
    /** Settles a run whose client gets `error` instead of any answer. */
    const settleUnanswered = (
      error: unknown,
      usage: Usage,
      ending: { queueMs?: number; unstarted: boolean; unanswered?: boolean },
    ) => {
      const totalMs = performance.now() - startedAt;
      // The engine's time as on an answered run (its attempts, waits between them, a queue): the
      // gateway overhead of a request the upstream failed counts too, not only of those it served.
      input.annotate({ engineMs: prepareMs + totalMs, queueMs: ending.queueMs });
      return ticket.settle({
        usage,
        finishReason: undefined,
        errorCode: isAppError(error) ? error.code : "internal_error",
        timings: { firstPartMs: undefined, totalMs, queueMs: ending.queueMs },
        unstarted: ending.unstarted,
        unanswered: ending.unanswered,
      });
    };
    let first: IteratorResult<PartBatch>;
    try {
      first = await run.first();
    } catch (error) {
      // Tokens generated before it failed without an answer (an upstream's reasoning) are
      // recorded (as estimated, with the prompt), and not charged.
      const generated = generatedTokensOf(error);
      await settleUnanswered(
        error,
        {
          promptTokens: run.current.prepared.promptTokens,
          completionTokens: generated ?? 0,
          estimated: run.current.prepared.promptTokensEstimated === true || generated !== undefined,
        },
        { unstarted: true, unanswered: generated !== undefined, queueMs: queueTimeOf(error) },
      );
      run.current.release();
      throw error;
    }
    const { iterator } = run.current;
    // Cut by the server (a shutdown) before its answer began: the error itself (a 503 the client
    // may retry elsewhere, streamed or not), not a stream that begins only to break at once.
    const cutEnd = first.done ? undefined : endIfCutBeforeAnswer(first.value, signal);
    if (cutEnd !== undefined) {
      await iterator.return?.();
      await settleUnanswered(signal.reason, cutEnd.usage, {
        ...(cutEnd.queueMs === undefined ? {} : { queueMs: cutEnd.queueMs }),
        unstarted: cutEnd.type === "finish" && cutEnd.unstarted === true,
      });
      run.current.release();
      throw signal.reason;
    }
    // A fallback model that served is the one the client is told of and the one that is charged.
    const servedById = run.current.prepared.servedBy?.();
    const servedBy =
      servedById === undefined
        ? undefined
        : this.#servedModel(servedById, alternateModels ?? [], entry.model);
    const identity: CompletionIdentity = {
      id: createCompletionId(),
      created,
      model: (servedBy ?? entry.model).id,
    };
    // The completion's id on the request's log line: the one id a client quoting an answer has.
    input.annotate(
      servedBy === undefined
        ? { completion: identity.id }
        : { completion: identity.id, servedBy: servedBy.id },
    );
    const settledAs: SettledAs = {};
    return {
      identity,
      parts: settleOnEnd(first, iterator, ticket, {
        startedAt,
        prepareMs,
        servedBy,
        annotate: input.annotate,
        signal,
        release: run.current.release,
        streamed: options.stream,
        settledAs,
      }),
      settledUnanswered: () => settledAs.unanswered,
      settledCut: () => settledAs.cut,
    };
  }

  /** The catalogue chat models among `ids` (an engine's alternates), in order. */
  #chatModels(ids: readonly string[]): CatalogModel[] {
    return ids.flatMap((id) => {
      const model = this.#registry.get(id)?.model;
      return model?.kind === "chat" ? [model] : [];
    });
  }

  /**
   * The catalogue entry that bills the fallback `id` that served: the one admitted with the
   * request, which priced its reservation, whatever a reload changed since. Only a fallback
   * missing from the catalogue at admission is not among `admitted` (a reload removed it and
   * another restored it before it served): then its entry now, else, removed again, the `named`
   * model's prices (the reservation covered them) under the fallback's id.
   */
  #servedModel(id: string, admitted: readonly CatalogModel[], named: CatalogModel): CatalogModel {
    const current = this.#registry.get(id)?.model;
    return (
      admitted.find((model) => model.id === id) ??
      (current?.kind === "chat" ? current : undefined) ?? { ...named, id }
    );
  }
}

/**
 * The ending of a run that the server cut (its signal aborted with an AppError: a shutdown)
 * before it generated anything, when `batch`, its first, is only that ending; else undefined.
 */
function endIfCutBeforeAnswer(batch: PartBatch, signal: AbortSignal): EndPart | undefined {
  const only = batch.length === 1 ? batch[0] : undefined;
  if (only === undefined || (only.type !== "finish" && only.type !== "error")) return undefined;
  if (!signal.aborted || !isAppError(signal.reason) || (only.usage.completionTokens ?? 0) > 0)
    return undefined;
  return only;
}
