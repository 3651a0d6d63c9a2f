import type { CatalogModel, OpenAiEngineConfig } from "../../catalog/catalog.ts";
import { AppError } from "../../errors/app-error.ts";
import { checkContextLength, describeAlsoCounted, fitsContext } from "../check-context-length.ts";
import type { EngineLogger } from "../create-engine.ts";
import type {
  AlternateBound,
  ChatEngine,
  ChatRequest,
  ModelStatus,
  PreparedChat,
  PrepareOptions,
  UpstreamAttemptOutcome,
} from "../engine.ts";
import { ENGINE_CLOSED } from "../engine-closed.ts";
import { convertRequestBody } from "./convert-request-body.ts";
import { createEndpointBalancer } from "./create-endpoint-balancer.ts";
import { createStallWatchdog } from "./create-stall-watchdog.ts";
import { createUpstreamEndpoint, type UpstreamEndpoint } from "./create-upstream-endpoint.ts";
import { countPromptTokens } from "./estimate-prompt-tokens.ts";
import { learnContextLength } from "./learn-context-length.ts";
import { runUpstreamChat, type WaitBudget } from "./run-upstream-chat.ts";
import { anyCanServe, type FallbackPlace, runWithFallbacks } from "./run-with-fallbacks.ts";
import { closingError } from "./start-upstream-attempt.ts";
import type { UpstreamCall } from "./start-upstream-call.ts";
import { UpstreamCounts } from "./upstream-counts.ts";
import { resolveUpstreamSettings, type UpstreamSettings } from "./upstream-settings.ts";
import type { UpstreamRequestBody } from "./upstream-wire.ts";

/** Options of {@link createOpenAiEngine}. */
export interface OpenAiEngineOptions {
  /** A catalogue chat model whose `engine.type` is `"openai"`. */
  model: CatalogModel;
  /** The engine of another catalogue model, for `fallbacks`; looked up when a fallback is needed. */
  resolveEngine?: ((id: string) => ChatEngine | undefined) | undefined;
  /** Keeps a fallback's engine open while a request may still need it (EngineContext.holdEngine). */
  holdEngine?: ((engine: ChatEngine) => () => void) | undefined;
  logger?: EngineLogger | undefined;
  /** Settings beyond the configuration's (tests use short timeouts). */
  settings?: Partial<UpstreamSettings> | undefined;
  /** Source of jitter in [0, 1). Default `Math.random`. */
  random?: (() => number) | undefined;
  /**
   * Where the model's attempts and fallbacks are counted, for `/metrics`: the model's, shared
   * with the engine this one replaces (UpstreamCounts.of). Default: counts of its own.
   */
  counts?: UpstreamCounts | undefined;
  /** Shorter pauses between readings of the upstream's model list (tests; learn-context-length.ts). */
  contextLengthLearning?: { refreshMs?: number; retryMs?: number } | undefined;
}

const silentLogger: EngineLogger = { info: () => {}, warn: () => {}, error: () => {} };

/**
 * The prompt tokens an upstream is believed for a model without a `context_length`: this many
 * times the prompt's bound (its UTF-8 bytes and template tokens) plus {@link PROMPT_MARGIN_TOKENS},
 * room for a system prompt the upstream adds itself (an Ollama Modelfile's).
 */
const PROMPT_BYTES_FACTOR = 4;
const PROMPT_MARGIN_TOKENS = 4096;

/**
 * How a request runs on a model that serves as another's fallback: where it stands in the chain,
 * and the pausing budget it shares with the primary and the other fallbacks.
 */
interface FallbackRun extends FallbackPlace {
  waitBudget: WaitBudget;
  /** The request's logger. */
  logger: EngineLogger;
  /**
   * The request's signal and account, for a local fallback that is still loading: a client that
   * leaves stops waiting for it, and the places of those waiting are shared between accounts.
   * (Without them, requests whose clients had left held their places and reservations until the
   * download ended, and every account's waited as one.)
   */
  signal: AbortSignal;
  tenant: string | undefined;
}

/**
 * Engines of this kind, prepared as a fallback, without their own fallbacks: a model that serves
 * as a fallback only tries its own endpoints, so fallbacks never chain and never loop. With the
 * catalogue's `context_length` of each (`undefined` where it gives none: one learned from the
 * upstream may change before the fallback runs).
 */
const preparersAsFallback = new WeakMap<
  ChatEngine,
  {
    prepare: (request: ChatRequest, run: FallbackRun) => Promise<PreparedChat>;
    contextLength: number | undefined;
  }
>();

/**
 * Engines of this kind, by how long every endpoint still rests (ms; `undefined` while one takes
 * requests, once closed, or while every one rests for a failure only the operator can mend): a
 * fallback skipped as unavailable for that long is a failure that passes, and the client is told
 * to retry once it is back (run-with-fallbacks.ts).
 */
const restingTimes = new WeakMap<ChatEngine, () => number | undefined>();

/**
 * The upstream engine: a catalogue model served by OpenAI-compatible servers over HTTP.
 *
 * `prepare` estimates the prompt tokens (estimate-prompt-tokens.ts: the upstream's tokenizer is
 * unknown), checks them against the catalogue's `context_length` when it gives one (else the one
 * the upstream's model list gives, once learned: learn-context-length.ts), and reserves
 * `max_tokens`, else the rest of the context (at most `defaultMaxCompletionTokens` of a learned
 * one), else `defaultMaxCompletionTokens` (which then goes upstream as `max_tokens`, so the
 * upstream cannot generate past what was reserved). `run` streams
 * from the endpoints (run-upstream-chat.ts: balancing, retries, cooldown, timeouts, usage) and,
 * when they all fail before the first part, from the `fallbacks` the caller allows (`mayServe`:
 * the key's permission; run-with-fallbacks.ts). The prepared request names them
 * (`alternateModelIds`) so that billing reserves for the dearest and charges the one that served
 * (`servedBy`); a fallback is held to this run's `maxCompletionTokens`, the bound the reservation
 * was priced at. The catalogue's `model` name goes upstream; the client only sees catalogue ids.
 */
export function createOpenAiEngine(options: OpenAiEngineOptions): ChatEngine {
  const { model } = options;
  const config = readOpenAiConfig(model);
  const settings = resolveUpstreamSettings(config, options.settings);
  const logger = options.logger ?? silentLogger;
  const endpoints = config.endpoints.map((endpoint, index) =>
    createUpstreamEndpoint({
      index,
      baseUrl: endpoint.baseUrl,
      apiKey: endpoint.apiKey,
      headers: endpoint.headers,
      settings,
    }),
  );
  const counts = options.counts ?? new UpstreamCounts();
  const endpointNames = nameEndpoints(endpoints);
  // Log lines name each endpoint as `/metrics` does, so that two on one base URL are told apart
  // in both.
  for (const endpoint of endpoints) endpoint.label = endpointNames[endpoint.index] ?? endpoint.label;
  counts.configure(endpointNames, config.fallbacks);
  const countAttempt = (endpoint: UpstreamEndpoint, outcome: UpstreamAttemptOutcome) =>
    counts.countAttempt(endpoint.label, outcome);
  const balancer = createEndpointBalancer({
    endpoints,
    failureThreshold: settings.failureThreshold,
    cooldownMs: settings.cooldownMs,
    maxCooldownMs: settings.maxCooldownMs,
    onRest: (endpoint) => {
      for (const requeue of [...endpoint.unsent]) requeue();
    },
  });
  const watchdog = createStallWatchdog({
    firstByteMs: settings.firstByteTimeoutMs,
    idleMs: settings.idleTimeoutMs,
  });
  const inFlight = new Set<UpstreamCall>();
  /** Runs under way, retries and waits between attempts included: what a reload waits for. */
  const activeRuns = { count: 0 };
  const closeController = new AbortController();
  let closed = false;
  // Without a catalogue context length, the upstream's model list may give one (vLLM's).
  const learner =
    model.contextLength === undefined
      ? learnContextLength({
          modelId: model.id,
          upstreamModel: config.model,
          endpoints,
          timeoutMs: settings.connectTimeoutMs,
          signal: closeController.signal,
          logger,
          defaultMaxTokens: settings.defaultMaxCompletionTokens,
          ...options.contextLengthLearning,
        })
      : undefined;

  const prepare = async (
    request: ChatRequest,
    prepareOptions: PrepareOptions,
    asFallback: FallbackRun | undefined,
  ): Promise<PreparedChat> => {
    if (closed) {
      throw new AppError("model_unavailable", `The model '${model.id}' is shutting down. Please retry.`, {
        retryAfterSeconds: 1,
      });
    }
    const { estimate: promptTokens, atMost: promptTokensAtMost } = countPromptTokens(request);
    const runLogger = asFallback?.logger ?? prepareOptions.logger ?? logger;
    // There is a learner only where the catalogue gives no context length.
    const learned = learner?.current();
    const contextLength = model.contextLength ?? learned;
    if (contextLength !== undefined) {
      checkContextLength({
        contextLength,
        promptTokens,
        maxTokens: request.maxTokens,
        alsoCounted: describeAlsoCounted(request),
      });
    }
    /** The most a request without max_tokens may generate: what the context leaves, else the default bound. */
    const completionRoom =
      contextLength === undefined ? settings.defaultMaxCompletionTokens : contextLength - promptTokens;
    // What is reserved (and counted against the key's tokens per minute): max_tokens, else that
    // room; but no more than the default bound where the context was only learned from the
    // upstream, as before it was known. A hosted model's list says a million tokens: reserved in
    // full, each request without max_tokens held most of a small balance and was refused by any
    // tpm below that. Its answer still runs to its natural end, charged in full as far as the
    // balance pays (billing.md).
    const maxCompletionTokens =
      request.maxTokens ??
      (learned === undefined
        ? completionRoom
        : Math.min(completionRoom, settings.defaultMaxCompletionTokens));
    // Without a context length nothing else bounds the upstream's generation: send the bound the
    // reservation assumed. With one, the upstream's context does (a bound from our estimated prompt
    // could pass the upstream's context and be refused).
    const upstreamMaxTokens =
      request.maxTokens ?? (contextLength === undefined ? maxCompletionTokens : undefined);
    const upstreamBody = convertRequestBody({ request, model: config.model, maxTokens: upstreamMaxTokens });
    const fullBody = JSON.stringify(upstreamBody);
    /** Bodies for endpoints that refuse a field, by shape, made when first asked for. */
    let otherBodies: Map<string, string> | undefined;
    const body = (takes: { streamOptions: boolean; maxTokens: boolean }): string => {
      if (takes.streamOptions && takes.maxTokens) return fullBody;
      otherBodies ??= new Map();
      const shape = `${takes.streamOptions}/${takes.maxTokens}`;
      let text = otherBodies.get(shape);
      if (text === undefined) {
        text = JSON.stringify(shapeBody(upstreamBody, takes));
        otherBodies.set(shape, text);
      }
      return text;
    };
    const fallbacks =
      asFallback === undefined && options.resolveEngine !== undefined
        ? config.fallbacks.filter((id) => prepareOptions.mayServe?.(id) ?? true)
        : [];
    // The fallbacks' engines as the request is admitted (priced with their catalogue entries then):
    // a reload while the primary fails must not remove or replace the one that then serves.
    const admittedEngines = new Map(fallbacks.map((id) => [id, options.resolveEngine?.(id)]));
    const resolveEngine = (id: string) => admittedEngines.get(id);
    /** Whether a fallback may serve the run of `tenant`'s request now (as that tenant finds them). */
    const canFallBackFor = (tenant: string | undefined) =>
      asFallback?.canFallBack ??
      (fallbacks.length === 0 ? undefined : () => anyCanServe(fallbacks, resolveEngine, tenant));
    // Each fallback's share of the reservation, where it can tell (see boundFallback).
    const bounds = new Map<string, AlternateBound>();
    for (const id of fallbacks) {
      const fallback = resolveEngine(id);
      const bound =
        fallback === undefined
          ? undefined
          : await boundFallback(fallback, request, { promptTokens, maxCompletionTokens });
      if (bound !== undefined) bounds.set(id, bound);
    }
    let servedBy: string | undefined;
    return {
      promptTokens,
      promptTokensEstimated: true,
      promptTokensAtMost,
      maxCompletionTokens,
      ...(fallbacks.length === 0 ? {} : { alternateModelIds: fallbacks }),
      ...(bounds.size === 0 ? {} : { alternateBounds: bounds }),
      servedBy: () => servedBy,
      run(signal, runOptions) {
        const tenant = runOptions?.tenant;
        servedBy = undefined;
        const waitBudget = asFallback?.waitBudget ?? { remainingMs: settings.maxRetryWaitMs };
        const primary = runUpstreamChat({
          modelId: model.id,
          balancer,
          body,
          promptTokens,
          // What the request can have used: a few times the prompt's bytes, and no more than the
          // model's context (a broken upstream reporting a billion prompt tokens for a short
          // prompt was charged the whole context, 128k tokens on a large model); no more
          // completion than it was bounded to (sent upstream as max_tokens, or what the context
          // leaves, which more text that came may pass: see UsageBounds).
          usageBounds: {
            promptTokens: Math.min(
              contextLength ?? Number.POSITIVE_INFINITY,
              PROMPT_BYTES_FACTOR * promptTokensAtMost + PROMPT_MARGIN_TOKENS,
            ),
            completionTokens: request.maxTokens ?? completionRoom,
            completionSent: upstreamBody.max_tokens !== undefined,
            contextTokens: contextLength,
          },
          logprobs: request.logprobs !== undefined,
          settings,
          signal,
          closeSignal: closeController.signal,
          watchdog,
          inFlight,
          logger: runLogger,
          tenant,
          random: options.random,
          canFallBack: canFallBackFor(tenant),
          waitBudget,
          activeRuns,
          countAttempt,
        });
        if (fallbacks.length === 0) return primary;
        return runWithFallbacks({
          modelId: model.id,
          primary,
          fallbacks,
          resolveEngine,
          holdEngine: options.holdEngine,
          prepareFallback: (engine, fallbackRequest, place) =>
            prepareFallbackWithin(engine, fallbackRequest, maxCompletionTokens, {
              ...place,
              waitBudget,
              logger: runLogger,
              signal,
              tenant,
            }),
          request,
          signal,
          tenant,
          logger: runLogger,
          onFallback: (id) => {
            servedBy = id;
          },
          countFallback: (id, outcome) => counts.countFallback(id, outcome),
          restingMs: (fallback) => restingTimes.get(fallback)?.(),
        });
      },
    };
  };

  const engine: ChatEngine = {
    get contextLength() {
      return model.contextLength ?? learner?.current();
    },
    supportsMultipleChoices: false,
    supportsLogprobs: true,
    recoversByItself: true,
    status(tenant?: string): ModelStatus {
      return closed || balancer.forTenant(tenant).allCoolingDown() ? "unavailable" : "available";
    },
    prepare: (request, prepareOptions = {}) => prepare(request, prepareOptions, undefined),
    // Upstream servers queue for themselves; what waits here waits for one of an endpoint's
    // `max_connections` (connection-slots.ts). A reload closes a replaced engine once this says
    // it runs nothing (server.ts), not after its longest bound.
    load: () => {
      let waiting = 0;
      for (const endpoint of endpoints) waiting += endpoint.slots?.waiting ?? 0;
      return { running: activeRuns.count - waiting, waiting };
    },
    endpoints: () => ({ total: endpoints.length, resting: balancer.restingCount() }),
    upstreamActivity: () => counts.read(),
    async close() {
      if (closed) return;
      closed = true;
      closeController.abort(ENGINE_CLOSED);
      for (const call of inFlight) call.abort(closingError(model.id));
      await Promise.all(endpoints.map((endpoint) => endpoint.pool.destroy()));
    },
  };
  preparersAsFallback.set(engine, {
    prepare: (request, run) => prepare(request, {}, run),
    contextLength: model.contextLength,
  });
  // Endpoints that all rest for what only the operator can mend are no rest a retry waits out.
  restingTimes.set(engine, () =>
    closed || !balancer.allCoolingDown() || balancer.operatorFaults().length > 0
      ? undefined
      : balancer.waitForEndpoint(),
  );
  return engine;
}

/**
 * The upstream body as an endpoint takes it (see {@link UpstreamEndpoint}): without
 * `stream_options` for one that refuses them, the bound as `max_completion_tokens` for one that
 * refuses `max_tokens`.
 */
function shapeBody(
  body: UpstreamRequestBody,
  takes: { streamOptions: boolean; maxTokens: boolean },
): UpstreamRequestBody {
  if (takes.streamOptions && takes.maxTokens) return body;
  const { stream_options: streamOptions, max_tokens: maxTokens, ...rest } = body;
  return {
    ...rest,
    ...(takes.streamOptions && streamOptions !== undefined ? { stream_options: streamOptions } : {}),
    ...(maxTokens === undefined
      ? {}
      : takes.maxTokens
        ? { max_tokens: maxTokens }
        : { max_completion_tokens: maxTokens }),
  };
}

/**
 * Prepares `request` on a fallback engine, without its own fallbacks, held to the completion
 * bound the reservation was priced at: a fallback whose own bound is larger (a longer context, or
 * none and so `defaultMaxCompletionTokens`) is prepared again with that bound as `max_tokens`. An
 * upstream fallback runs as `run` says (its place in the chain, the shared pausing budget).
 */
async function prepareFallbackWithin(
  engine: ChatEngine,
  request: ChatRequest,
  maxCompletionTokens: number,
  run: FallbackRun,
): Promise<PreparedChat> {
  const prepareAsFallback = preparersAsFallback.get(engine)?.prepare;
  const prepareWithoutFallbacks = (value: ChatRequest) =>
    prepareAsFallback === undefined
      ? engine.prepare(value, { logger: run.logger, signal: run.signal, tenant: run.tenant })
      : prepareAsFallback(value, run);
  const prepared = await prepareWithoutFallbacks(request);
  if (prepared.maxCompletionTokens <= maxCompletionTokens) return prepared;
  return prepareWithoutFallbacks({ ...request, maxTokens: maxCompletionTokens });
}

/**
 * What `fallback` can cost of `request` (its share of the reservation), where it can tell, from
 * what stays true until it runs (held to `run.maxCompletionTokens`, as prepareFallbackWithin
 * holds it): a loaded local model counts the prompt itself (its chat template's tokens included,
 * far more than the estimate's bound can be) against its loaded context; an upstream model with
 * a catalogue `context_length` counts the estimate this engine made (as its own prepare will).
 * Where that context cannot hold the request, the fallback would refuse it: it `refuses`, adding
 * nothing. `undefined`: it cannot tell (a local model loading, a learned context length).
 */
async function boundFallback(
  fallback: ChatEngine,
  request: ChatRequest,
  run: { promptTokens: number; maxCompletionTokens: number },
): Promise<AlternateBound | undefined> {
  const measured = await fallback.measurePromptTokens?.(request);
  const upstream = preparersAsFallback.get(fallback);
  const promptTokens = measured ?? (upstream === undefined ? undefined : run.promptTokens);
  const contextLength = measured === undefined ? upstream?.contextLength : fallback.contextLength;
  if (promptTokens === undefined || contextLength === undefined) return undefined;
  if (!fitsContext({ contextLength, promptTokens, maxTokens: request.maxTokens })) return { refuses: true };
  return {
    refuses: false,
    ...(measured === undefined ? {} : { promptTokens: measured }),
    completionTokens: Math.min(run.maxCompletionTokens, request.maxTokens ?? contextLength - promptTokens),
  };
}

/**
 * The endpoints' names in `/metrics` and logs: each one's base URL without credentials or query,
 * and where two of the model's endpoints share one (one server, two keys) its place in the list,
 * from 1, after `#`.
 */
function nameEndpoints(endpoints: readonly UpstreamEndpoint[]): string[] {
  const labels = endpoints.map((endpoint) => endpoint.label);
  return labels.map((label, index) =>
    labels.indexOf(label) === labels.lastIndexOf(label) ? label : `${label}#${index + 1}`,
  );
}

function readOpenAiConfig(model: CatalogModel): OpenAiEngineConfig {
  if (model.engine?.type !== "openai") {
    throw new Error(`createOpenAiEngine needs a model with an openai engine; '${model.id}' has none`);
  }
  return model.engine;
}
