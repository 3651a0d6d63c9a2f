import { setTimeout as sleep } from "node:timers/promises";
import { AppError } from "../../errors/app-error.ts";
import type { StreamPart } from "../engine.ts";
import { computeRetryDelay } from "./compute-retry-delay.ts";
import type { UpstreamEndpoint } from "./create-upstream-endpoint.ts";
import { type AttemptContext, closingError, startUpstreamAttempt } from "./start-upstream-attempt.ts";
import type { UpstreamFailure } from "./upstream-failure.ts";

/** Everything one prepared request needs to run against a model's endpoints. */
export interface UpstreamRunOptions extends AttemptContext {
  /** Source of jitter in [0, 1). Default `Math.random`. */
  random?: (() => number) | undefined;
}

/**
 * Runs one request against a model's endpoints and streams its parts.
 *
 * Until the first part is produced, a failed attempt (connection error, timeout, 408, 429, 5xx,
 * a stream cut before any content) is retried: at once on another endpoint when one is usable,
 * else on the same after an exponential backoff with jitter that is never shorter than the
 * upstream's `retry-after` or the endpoint's cooldown. When the retries are spent, or the next
 * pause would be longer than `maxRetryWaitMs`, the last failure is thrown as an AppError (the
 * caller may then try fallback models). After the first part, a failure ends the stream with an
 * `error` part. Every ending carries usage: the upstream's, or an estimate marked `estimated`.
 */
export async function* runUpstreamChat(options: UpstreamRunOptions): AsyncGenerator<StreamPart> {
  const { balancer, settings, signal, closeSignal } = options;
  const excluded = new Set<UpstreamEndpoint>();
  let endpoint = balancer.pick();
  let lastFailure: UpstreamFailure | undefined;
  for (let attempt = 0; ; attempt++) {
    if (signal.aborted) {
      yield abortFinish(options.promptTokens);
      return;
    }
    if (closeSignal.aborted) throw closingError(options.modelId);
    if (endpoint === undefined) {
      const wait = balancer.waitForEndpoint(excluded);
      // Waiting out a cooldown is a retry: with none left, fail fast and say when to come back.
      if (wait === undefined || wait > settings.maxRetryWaitMs || attempt >= settings.maxRetries) {
        throw lastFailure?.error ?? coolingError(options.modelId, wait);
      }
      await pause(wait, signal, closeSignal);
      endpoint = balancer.pick(excluded);
      continue;
    }

    const running = startUpstreamAttempt(endpoint, options);
    let batch = await running.next();
    if (batch.kind === "parts") {
      try {
        for (;;) {
          for (const part of batch.parts) yield part;
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
    lastFailure = failure;
    balancer.reportFailure(endpoint, failure);
    options.logger.warn(
      { model: options.modelId, endpoint: endpoint.label, attempt: attempt + 1, failure: failure.summary },
      "upstream attempt failed",
    );
    if (!failure.retryable || attempt >= settings.maxRetries) throw failure.error;
    if (!failure.retrySameEndpoint) excluded.add(endpoint);

    const other = balancer.pick(new Set([...excluded, endpoint]));
    if (other !== undefined) {
      endpoint = other;
      continue;
    }
    const cooling = balancer.waitForEndpoint(excluded);
    if (cooling === undefined) throw failure.error;
    const delay = Math.max(
      cooling,
      computeRetryDelay({
        retry: attempt + 1,
        baseMs: settings.retryBaseDelayMs,
        maxMs: settings.retryMaxDelayMs,
        retryAfterMs: failure.retryAfterMs,
        ...(options.random === undefined ? {} : { random: options.random }),
      }),
    );
    if (delay > settings.maxRetryWaitMs) throw failure.error;
    await pause(delay, signal, closeSignal);
    endpoint = balancer.pick(excluded);
  }
}

function abortFinish(promptTokens: number): StreamPart {
  return {
    type: "finish",
    reason: "stop",
    rawReason: "abort",
    usage: { promptTokens, completionTokens: 0, estimated: true },
  };
}

function coolingError(modelId: string, waitMs: number | undefined): AppError {
  return new AppError(
    "upstream_unavailable",
    `The upstream servers of the model '${modelId}' are failing and resting for a moment. Please retry later.`,
    { retryAfterSeconds: waitMs === undefined ? undefined : Math.max(1, Math.ceil(waitMs / 1000)) },
  );
}

/** Waits, unless the client or the engine gives up first. */
async function pause(milliseconds: number, signal: AbortSignal, closeSignal: AbortSignal): Promise<void> {
  if (milliseconds <= 0) return;
  try {
    await sleep(milliseconds, undefined, { signal: AbortSignal.any([signal, closeSignal]) });
  } catch {
    // Aborted: the loop looks at the signals next.
  }
}
