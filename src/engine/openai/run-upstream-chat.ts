import { setTimeout as sleep } from "node:timers/promises";
import { AppError, reviseAppError } from "../../errors/app-error.ts";
import type { FinishPart, PartBatch } from "../engine.ts";
import { computeRetryDelay } from "./compute-retry-delay.ts";
import type { UpstreamEndpoint } from "./create-upstream-endpoint.ts";
import { closingError, startUpstreamAttempt } from "./start-upstream-attempt.ts";
import type { AttemptContext } from "./upstream-attempt.ts";
import { createUnavailableError, type UpstreamFailure } from "./upstream-failure.ts";

/**
 * What a request may still pause for endpoints, in ms: one budget of `maxRetryWaitMs` for the
 * model asked for and all its fallbacks, so that a chain of fallbacks does not wait longer.
 */
export interface WaitBudget {
  remainingMs: number;
}

/**
 * Resends of one request after the upstream closed the kept-alive connection it went out on
 * (UpstreamFailure.closedWhileIdle). A resend usually goes out on a new connection; an upstream
 * that closes kept-alive connections on each request is failing, and is then held to account.
 */
const MAX_IDLE_RESENDS = 2;

/** Everything one prepared request needs to run against a model's endpoints. */
export interface UpstreamRunOptions extends AttemptContext {
  /** Source of jitter in [0, 1). Default `Math.random`. */
  random?: (() => number) | undefined;
  /**
   * Whether a fallback model could serve the request now: then it does not wait for endpoints
   * that are resting (cooldown, `retry-after`). Default: none could.
   */
  canFallBack?: (() => boolean) | undefined;
  /**
   * The request's budget for pausing, shared with its fallbacks and spent by each pause. Default:
   * a budget of this run's own, `maxRetryWaitMs`.
   */
  waitBudget?: WaitBudget | undefined;
  /** The engine's count of runs under way (from the first part asked for to the last). */
  activeRuns?: { count: number } | undefined;
}

/**
 * Runs one request against a model's endpoints and streams its parts.
 *
 * Until the first part is produced, a failed attempt (connection error, timeout, 408, 429, 5xx,
 * a stream cut before any content) is retried: at once on an endpoint this request has not tried
 * yet when one is usable, else, once it has tried them all, after a pause (compute-retry-delay.ts:
 * exponential backoff with jitter, or the time until a resting endpoint is back, plus jitter) on
 * whichever is usable then. Waiting for endpoints that all rest when the request comes is such a
 * pause too. When the retries are spent, or the pauses would add up to more than
 * `maxRetryWaitMs` (counting those of the request's other runs sharing `waitBudget`: the primary
 * and its fallbacks), or every endpoint is resting while a fallback model could serve the request,
 * the last failure is thrown as an AppError (the caller then tries the fallbacks). An attempt
 * still waiting for a connection when its endpoint begins to rest goes elsewhere, an endpoint
 * that refuses `stream_options` is asked again at once without it, and a request that met a
 * kept-alive connection the upstream closed just then is sent again at once: none of these costs
 * a retry. After the first part, a failure ends the stream with an `error` part. Every ending
 * carries usage: the upstream's, or an estimate marked `estimated`. Parts come in the batches the
 * attempt read them in.
 */
export async function* runUpstreamChat(options: UpstreamRunOptions): AsyncGenerator<PartBatch> {
  const activeRuns = options.activeRuns;
  if (activeRuns !== undefined) activeRuns.count++;
  try {
    const { balancer, settings, signal, closeSignal } = options;
    /** Endpoints not to go back to: their set-up is wrong. */
    const excluded = new Set<UpstreamEndpoint>();
    /** Endpoints this request failed on: going back to one at once would likely fail again. */
    const tried = new Set<UpstreamEndpoint>();
    let endpoint = balancer.pick();
    let lastFailure: UpstreamFailure | undefined;
    /**
     * An attempt failed in a way that passes (a rest, a 429, a 5xx): the request's last error,
     * whatever it is, must not tell the client that no retry can help (one endpoint's wrong
     * api_key while another only rests).
     */
    let passingFailure = false;
    /**
     * The request's last error as the client gets it. Its `retry-after` says when the first
     * endpoint that could serve a retry is back from its rest, not what the last failure alone
     * said (1 s by default): a retry sooner, within the cooldown this very failure may have begun,
     * would fail at once without reaching the upstream, and one endpoint's long `retry-after`
     * does not hold a retry back from another that takes requests now. Endpoints this request
     * left out for their set-up (a wrong api_key) do not count. It does not say that no retry can
     * help after a failure that passes, nor while an endpoint not left out may serve a retry: one
     * that rests (one endpoint's wrong api_key while the other, not tried, rests after other
     * requests' failures), or one the retries did not reach.
     */
    const finalError = (error: AppError): AppError => {
      if (error.status !== 429 && error.status !== 503) return error;
      const restingMs = balancer.waitForEndpoint(excluded);
      return reviseAppError(error, {
        retryAfterSeconds:
          restingMs === undefined ? error.retryAfterSeconds : Math.max(1, Math.ceil(restingMs / 1000)),
        retryable: error.retryable || passingFailure || restingMs !== undefined,
      });
    };
    /** Retries so far: failed attempts tried again, and waits for a resting endpoint. */
    let retries = 0;
    /** Requests sent again after the upstream closed their kept-alive connection (MAX_IDLE_RESENDS). */
    let idleResends = 0;
    /** Pauses so far: each backs off longer than the one before. */
    let pauses = 0;
    /** Milliseconds paused so far by this run, for backoff or resting endpoints. */
    let waited = 0;
    const budget = options.waitBudget ?? { remainingMs: settings.maxRetryWaitMs };
    /** Whether a fallback should serve the request now rather than it wait `restingMs` for an endpoint. */
    const fallBackNow = (restingMs: number): boolean => restingMs > 0 && options.canFallBack?.() === true;
    /**
     * The pause before the next attempt while the endpoints outside `excluded` rest `restingMs`
     * (0: one is usable), or `undefined` when it would take the request past `maxRetryWaitMs`.
     */
    const planPause = (restingMs: number): number | undefined => {
      const left = Math.min(settings.maxRetryWaitMs - waited, budget.remainingMs);
      const delay = computeRetryDelay({
        retry: pauses + 1,
        baseMs: settings.retryBaseDelayMs,
        maxMs: settings.retryMaxDelayMs,
        restingMs,
        withinMs: left,
        random: options.random,
      });
      return delay <= left ? delay : undefined;
    };
    const takePause = async (delay: number): Promise<void> => {
      pauses++;
      waited += delay;
      budget.remainingMs -= delay;
      await pause(delay, signal, closeSignal);
    };
    for (;;) {
      if (signal.aborted) {
        yield [abortFinish(options.promptTokens)];
        return;
      }
      if (closeSignal.aborted) throw closingError(options.modelId);
      if (endpoint === undefined) {
        const wait = balancer.waitForEndpoint(excluded);
        // Waiting out a cooldown is a retry: with none left, fail fast and say when to come back.
        const delay =
          wait === undefined || retries >= settings.maxRetries || fallBackNow(wait)
            ? undefined
            : planPause(wait);
        if (delay === undefined)
          throw lastFailure === undefined
            ? coolingError(options.modelId, wait, balancer.operatorFaults(excluded)[0])
            : finalError(lastFailure.error);
        retries++;
        await takePause(delay);
        endpoint = balancer.pick(excluded);
        continue;
      }

      const running = startUpstreamAttempt(endpoint, options);
      let batch = await running.next();
      if (batch.kind === "parts") {
        try {
          for (;;) {
            if (batch.parts.length > 0) yield batch.parts;
            // After its last part a run is not resumed: the attempt cleaned up before returning it.
            if (batch.last) return;
            batch = await running.next();
            if (batch.kind === "failed") throw new Error("an attempt failed after it produced parts");
          }
        } finally {
          running.dispose();
        }
      }

      const failure = batch.failure;
      if (failure.streamOptionsRefused === true) {
        // Only an attempt that sent the field is marked so: this happens once per endpoint.
        endpoint.takesStreamOptions = false;
        // Not the client's error, whose message is the upstream's, which may quote the prompt.
        options.logger.warn(
          {
            model: options.modelId,
            endpoint: endpoint.label,
            failure: failure.summary,
            upstreamBody: failure.upstreamBody,
          },
          "upstream endpoint refuses stream_options; it is asked without them from now on (usage estimated where it reports none)",
        );
        continue;
      }
      if (failure.maxTokensRefused === true) {
        endpoint.takesMaxTokens = false;
        options.logger.warn(
          {
            model: options.modelId,
            endpoint: endpoint.label,
            failure: failure.summary,
            upstreamBody: failure.upstreamBody,
          },
          "upstream endpoint refuses max_tokens; the completion bound goes as max_completion_tokens from now on",
        );
        continue;
      }
      if (failure.requeued === true) {
        // Never sent, so nothing to count: on to an endpoint not tried yet, else to the pause for one.
        endpoint = balancer.pick(tried);
        continue;
      }
      if (failure.closedWhileIdle === true && idleResends < MAX_IDLE_RESENDS) {
        // Its idle keep-alive timeout ran out as the request went out: the endpoint is as healthy
        // as before (held against it, one such race rested an endpoint just back from a rest).
        idleResends++;
        options.logger.info(
          { model: options.modelId, endpoint: endpoint.label },
          "upstream closed a kept-alive connection as the request went out on it; sent again",
        );
        continue;
      }
      lastFailure = failure;
      if (failure.error.retryable) passingFailure = true;
      balancer.reportFailure(endpoint, {
        ...failure,
        startedAt: running.startedAt,
        // Its summary quotes nothing the upstream said: later requests are told it as this one is.
        operatorFault: failure.error.retryable ? undefined : failure.summary,
      });
      options.logger.warn(
        {
          model: options.modelId,
          endpoint: endpoint.label,
          attempt: retries + 1,
          failure: failure.summary,
          // What the upstream said tells the operator a wrong key from a missing model or an
          // account without credit, which clients are not told apart (see UpstreamFailure).
          // Neither field quotes what may repeat the prompt; the client's error may.
          upstreamBody: failure.upstreamBody,
        },
        "upstream attempt failed",
      );
      // Left out before the client's advice is made from the endpoints that are not.
      if (!failure.retrySameEndpoint) excluded.add(endpoint);
      if (!failure.retryable || retries >= settings.maxRetries) throw finalError(failure.error);
      retries++;
      tried.add(endpoint);

      // Every excluded endpoint was tried: this leaves out both.
      const untried = balancer.pick(tried);
      if (untried !== undefined) {
        endpoint = untried;
        continue;
      }
      // The upstream's `retry-after` is in the balancer's rests (reportFailure).
      const resting = balancer.waitForEndpoint(excluded);
      const delay = resting === undefined || fallBackNow(resting) ? undefined : planPause(resting);
      if (delay === undefined) throw finalError(failure.error);
      await takePause(delay);
      endpoint = balancer.pick(excluded);
    }
  } finally {
    if (activeRuns !== undefined) activeRuns.count--;
  }
}

/**
 * The end of a run whose client left before an answer began (before the first attempt, or
 * between attempts that failed).
 */
function abortFinish(promptTokens: number): FinishPart {
  return {
    type: "finish",
    reason: "stop",
    rawReason: "abort",
    usage: { promptTokens, completionTokens: 0, estimated: true },
    unstarted: true,
  };
}

/**
 * Every endpoint rests (for `waitMs`). When each rests for a failure only the operator can mend
 * (`operatorFault`: a refused api_key, a missing model), the client is told what failed, and not
 * to retry, as the request that failed was: "resting for a moment" sent clients to retry in vain.
 */
function coolingError(modelId: string, waitMs: number | undefined, operatorFault?: string): AppError {
  if (operatorFault !== undefined) return createUnavailableError(modelId, operatorFault, waitMs, false);
  return new AppError(
    "upstream_unavailable",
    `The upstream servers of the model '${modelId}' are failing and resting for a moment. Please retry later.`,
    { retryAfterSeconds: waitMs === undefined ? undefined : Math.max(1, Math.ceil(waitMs / 1000)) },
  );
}

/** Waits, unless the client or the engine gives up first. */
async function pause(milliseconds: number, signal: AbortSignal, closeSignal: AbortSignal): Promise<void> {
  if (milliseconds <= 0) return;
  const until = performance.now() + milliseconds;
  const stopped = AbortSignal.any([signal, closeSignal]);
  try {
    // Timers run on the event loop's clock, which lags `performance.now()` (the clock cooldowns
    // are kept on) by as much as a busy turn takes: a pause for a resting endpoint could end just
    // before its rest did and spend a retry on finding it still resting. What is left is slept too.
    for (let left = milliseconds; left > 0 && !stopped.aborted; left = until - performance.now()) {
      await sleep(Math.ceil(left), undefined, { signal: stopped });
    }
  } catch {
    // Aborted: the loop looks at the signals next.
  }
}
