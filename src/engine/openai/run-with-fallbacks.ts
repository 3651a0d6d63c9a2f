import { type AppError, isAppError, reviseAppError } from "../../errors/app-error.ts";
import type { EngineLogger } from "../create-engine.ts";
import type { ChatEngine, ChatRequest, FallbackOutcome, PartBatch, PreparedChat } from "../engine.ts";

/** Where a fallback stands in the chain, for how it runs. */
export interface FallbackPlace {
  /**
   * Whether a fallback after this one could serve the request now: then this one does not wait
   * for endpoints that are resting but fails, and the next is tried at once. Only the last that
   * could serve may wait.
   */
  canFallBack: () => boolean;
}

/** What {@link runWithFallbacks} needs. */
export interface FallbackRunOptions {
  modelId: string;
  /** The run on the model's own endpoints. */
  primary: AsyncIterable<PartBatch>;
  /** Catalogue ids to try, in order, when the primary fails before its first part. */
  fallbacks: readonly string[];
  resolveEngine: (id: string) => ChatEngine | undefined;
  /**
   * Keeps a fallback's engine open (EngineContext.holdEngine): each is held from the run's start
   * until the primary's first part, and the one that serves until the run ends, so a reload that
   * replaces or removes it meanwhile does not close it under the request.
   */
  holdEngine?: ((engine: ChatEngine) => () => void) | undefined;
  /** Prepares a request on a fallback engine without its own fallbacks (no chains, no cycles). */
  prepareFallback: (engine: ChatEngine, request: ChatRequest, place: FallbackPlace) => Promise<PreparedChat>;
  request: ChatRequest;
  signal: AbortSignal;
  /** Whom the request is for, where a fallback's run waits for its turn (RunOptions.tenant). */
  tenant?: string | undefined;
  logger: EngineLogger;
  /** Told the catalogue id of the fallback that serves the request, before its first part. */
  onFallback?: (id: string) => void;
  /** Told how the request fared on each fallback it went on to, for `/metrics`. */
  countFallback?: ((id: string, outcome: FallbackOutcome) => void) | undefined;
  /**
   * How long an unavailable fallback still rests, in ms, where its engine can tell (an upstream
   * whose endpoints all rest); `undefined` otherwise (a local model that failed to load).
   */
  restingMs?: ((engine: ChatEngine) => number | undefined) | undefined;
}

/**
 * Runs the primary; when it fails before its first part with `upstream_unavailable` (every
 * endpoint down, refusing or rate-limiting), runs the request on each fallback model in turn until
 * one starts. A fallback that is unavailable, cannot take the request (its context is smaller, its
 * queue is full) or fails before its first part is skipped; when none starts, the primary's error
 * is thrown, saying that no retry can help only when no failure passes (a fallback skipped while
 * its endpoints rest passes: it is back when they are). Errors that are the
 * request's fault (400s) are never retried elsewhere. Only the model's own `fallbacks` are tried:
 * a fallback's fallbacks are not (no chains, no cycles). A fallback followed by one that could
 * serve does not wait for its resting endpoints ({@link FallbackPlace}).
 */
export async function* runWithFallbacks(options: FallbackRunOptions): AsyncGenerator<PartBatch> {
  const holds = new Map<string, () => void>();
  for (const id of options.fallbacks) {
    const engine = options.resolveEngine(id);
    if (engine !== undefined && options.holdEngine !== undefined && !holds.has(id))
      holds.set(id, options.holdEngine(engine));
  }
  /** Lets go of every fallback but `kept` (the one serving). */
  const release = (kept?: string) => {
    for (const [id, releaseHold] of holds) {
      if (id === kept) continue;
      releaseHold();
      holds.delete(id);
    }
  };
  try {
    const primary = options.primary[Symbol.asyncIterator]();
    let first: IteratorResult<PartBatch>;
    try {
      first = await primary.next();
    } catch (error) {
      if (!isAppError(error) || error.code !== "upstream_unavailable" || options.fallbacks.length === 0)
        throw error;
      yield* runFallbacks(
        {
          ...options,
          onFallback: (id) => {
            release(id);
            options.onFallback?.(id);
          },
        },
        error,
      );
      return;
    }
    release();
    if (first.done === true) return;
    yield* passOn(first.value, primary);
  } finally {
    release();
  }
}

/**
 * Yields `first`, then the rest of `run`. A consumer that stops at `first` (when it is the run's
 * last batch, say) stops `run` too: a generator stopped at its own `yield` runs only its own
 * clean-up, and `run`'s (the engine's count of running requests, the attempt's connection) would
 * never run: the count stayed up for good, and an engine a reload replaced was never closed.
 */
async function* passOn(first: PartBatch, run: AsyncIterator<PartBatch>): AsyncGenerator<PartBatch> {
  try {
    yield first;
    yield* { [Symbol.asyncIterator]: () => run };
  } finally {
    // Stopping a run that has ended already does nothing.
    await run.return?.();
  }
}

/**
 * Whether one of `ids` could serve a request now, as {@link runWithFallbacks} sees them: a model
 * that is there and not unavailable.
 */
export function anyCanServe(
  ids: readonly string[],
  resolveEngine: (id: string) => ChatEngine | undefined,
  tenant?: string,
): boolean {
  return ids.some((id) => {
    const engine = resolveEngine(id);
    return engine !== undefined && engine.status(tenant) !== "unavailable";
  });
}

async function* runFallbacks(options: FallbackRunOptions, primaryError: AppError): AsyncGenerator<PartBatch> {
  /** Fallbacks that cannot take this request as it is (a 400 of their own): the client is told why. */
  const refusals: { id: string; error: AppError }[] = [];
  /**
   * Failures, the primary's and the fallbacks', that pass (a 5xx, a rest, a full queue): the
   * client's retry may be served, whatever the others say (a wrong api_key of the primary's).
   */
  const passing: PassingFailure[] = primaryError.retryable ? [primaryError] : [];
  for (const [index, id] of options.fallbacks.entries()) {
    if (options.signal.aborted) break;
    const engine = options.resolveEngine(id);
    // As this request's tenant finds it: another tenant's rest on it is not this one's.
    if (engine === undefined || engine.status(options.tenant) === "unavailable") {
      // Skipped while its endpoints rest, it may serve a retry once they are back.
      const restingMs = engine === undefined ? undefined : options.restingMs?.(engine);
      if (restingMs !== undefined)
        passing.push({ retryAfterSeconds: Math.max(1, Math.ceil(restingMs / 1000)) });
      options.countFallback?.(id, "skipped");
      options.logger.warn(
        { model: options.modelId, fallback: id },
        engine === undefined
          ? "fallback model is not in the catalogue (a reload removed it, or nothing serves it here); skipped"
          : "fallback model is unavailable; skipped",
      );
      continue;
    }
    let run: AsyncIterator<PartBatch>;
    let first: IteratorResult<PartBatch>;
    try {
      const later = options.fallbacks.slice(index + 1);
      const place: FallbackPlace = {
        canFallBack: () => anyCanServe(later, options.resolveEngine, options.tenant),
      };
      const prepared = await options.prepareFallback(engine, options.request, place);
      run = prepared.run(options.signal, { tenant: options.tenant })[Symbol.asyncIterator]();
      first = await run.next();
    } catch (error) {
      options.countFallback?.(id, "failed");
      // A refusal of the request itself (400, 413 too large): the client is told why.
      if (isAppError(error) && (error.status === 400 || error.status === 413)) refusals.push({ id, error });
      else if (isAppError(error) && error.retryable) passing.push(error);
      // Its code, not its message: that is the client's, and may quote what an upstream said,
      // which may repeat the prompt. The fallback's own lines say what failed; a fault that is
      // no AppError (a bug) is logged with its stack.
      options.logger.warn(
        {
          model: options.modelId,
          fallback: id,
          ...(isAppError(error) ? { failure: error.code } : { err: error }),
        },
        "fallback model failed before its first part; skipped",
      );
      continue;
    }
    // The client left while the fallback waited (its queue, an upstream's retry-after): it served
    // nothing, and the request ends as the primary's (regression: recorded and counted as served
    // by a fallback that only ever answered 429).
    if (first.done !== true && options.signal.aborted && isAbortFinishOnly(first.value)) {
      await run.return?.();
      break;
    }
    options.logger.info({ model: options.modelId, fallback: id }, "request served by a fallback model");
    options.onFallback?.(id);
    options.countFallback?.(id, "served");
    if (first.done === true) return;
    yield* passOn(first.value, run);
    return;
  }
  if (options.signal.aborted) {
    yield [
      {
        type: "finish",
        reason: "stop",
        rawReason: "abort",
        usage: { promptTokens: undefined, completionTokens: 0 },
      },
    ];
    return;
  }
  throw withRefusals(withPassing(primaryError, passing), refusals);
}

/** Whether `batch` is only the finish of a run the client's leaving ended before any output. */
function isAbortFinishOnly(batch: PartBatch): boolean {
  return (
    batch.length > 0 &&
    batch.every(
      (part) => part.type === "finish" && part.rawReason === "abort" && part.usage.completionTokens === 0,
    )
  );
}

/** A failure that passes, by when it may be over (`undefined`: it named no time). */
type PassingFailure = Pick<AppError, "retryAfterSeconds">;

/**
 * The primary's failure, telling the client to retry when one of the `passing` failures may be
 * over by then (the primary's endpoint refused Tollgate's key while a fallback's only answered
 * 500: `x-should-retry: false` would stop the SDKs for good), and when: the soonest any of them
 * said, a retry then going to whichever can serve it. Unchanged when none passes.
 */
function withPassing(primaryError: AppError, passing: readonly PassingFailure[]): AppError {
  if (passing.length === 0) return primaryError;
  // A failure that named no time may be over at once.
  const soonest = passing.every((error) => error.retryAfterSeconds !== undefined)
    ? Math.min(...passing.map((error) => error.retryAfterSeconds ?? 0))
    : undefined;
  return reviseAppError(primaryError, { retryAfterSeconds: soonest, retryable: true });
}

/**
 * The primary's failure, its message followed by why each fallback that refused the request
 * refused it (its prompt over a local model's context, a schema its grammar cannot take): the
 * client learns what would let a fallback serve it, not only to retry later.
 */
function withRefusals(
  primaryError: AppError,
  refusals: readonly { id: string; error: AppError }[],
): AppError {
  if (refusals.length === 0) return primaryError;
  const reasons = refusals.map(
    ({ id, error }) => ` The fallback model '${id}' cannot take it: ${error.message}`,
  );
  return reviseAppError(primaryError, { message: `${primaryError.message}${reasons.join("")}` });
}
