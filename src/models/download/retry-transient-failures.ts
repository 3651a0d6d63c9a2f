import { setTimeout as delay } from "node:timers/promises";
import { ModelDownloadError } from "./model-download-error.ts";

/** How often and how patiently {@link retryTransientFailures} tries. */
export interface RetrySettings {
  /** Attempts in a row without progress before giving up. Default 5. */
  maxAttempts?: number | undefined;
  /** Pause before the first retry, doubled for each further one (at most 30 s). Default 1000. */
  retryDelayMilliseconds?: number | undefined;
}

const maxRetryDelayMilliseconds = 30_000;

/**
 * Runs `attempt` until it succeeds, retrying a retryable {@link ModelDownloadError} (a broken
 * connection, a 5xx or 429 answer) after a growing pause, announced through `onNotice`, or after
 * the pause the server asked for with `Retry-After` (create-http-status-error.ts), if longer. Any
 * other error, an abort, or too many failures in a row end it. `progress`, when given, measures
 * what the attempts achieved (bytes saved): an attempt that raised it does not count against the
 * limit.
 */
export async function retryTransientFailures<T>(
  attempt: () => Promise<T>,
  options: RetrySettings & {
    signal?: AbortSignal | undefined;
    onNotice?: ((message: string) => void) | undefined;
    progress?: () => Promise<number>;
  },
): Promise<T> {
  const maxAttempts = options.maxAttempts ?? 5;
  const retryDelay = options.retryDelayMilliseconds ?? 1000;
  let failures = 0;
  for (;;) {
    const before = (await options.progress?.()) ?? 0;
    try {
      return await attempt();
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      const progressed = ((await options.progress?.()) ?? 0) > before;
      failures = progressed ? 1 : failures + 1;
      if (!(error instanceof ModelDownloadError) || !error.retryable || failures >= maxAttempts) throw error;
      const backoff = Math.min(retryDelay * 2 ** (failures - 1), maxRetryDelayMilliseconds);
      // A server that said how long to wait (429 or 503 with Retry-After, capped) is not asked sooner.
      const pause = Math.max(backoff, error.retryAfterMilliseconds ?? 0);
      options.onNotice?.(
        `${error.message} Retrying in ${formatSeconds(pause)} (attempt ${failures + 1} of ${maxAttempts}).`,
      );
      await delay(pause, undefined, { signal: options.signal });
    }
  }
}

export function formatSeconds(milliseconds: number): string {
  const seconds = milliseconds / 1000;
  return `${Number.isInteger(seconds) ? seconds : seconds.toFixed(1)} s`;
}
